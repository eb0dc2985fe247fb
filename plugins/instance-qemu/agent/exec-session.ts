/**
 * A command in the guest: one agent channel. Output streams grant the agent credit as they are
 * read; input waits for the agent's credit. The agent sends both outputs' end before the exit.
 */
import { badRequest, type ExecSession, type ExecSpec } from '../../../sdk/index.js';
import { creditFrame, type AgentLink, type ChannelHandler } from './channel.js';
import { AgentError } from './errors.js';
import { CreditWindow, IncomingStream, outgoingStream } from './flow.js';
import type { KvFields } from './kv.js';
import { KvReply } from './kv.js';
import { FrameType, StreamId } from './protocol.js';

/** What `terminate` and a lost connection report as the exit: killed (128 + SIGKILL). */
const KILLED = 137;

export interface ExecOpener extends AgentLink {
  open(fields: KvFields, handler: ChannelHandler): Promise<number>;
}

function execFields(spec: ExecSpec): KvFields {
  const fields: KvFields = [['op', 'exec']];
  if (!spec.command.length) throw badRequest('No command given');
  for (const arg of spec.command) {
    if (arg.includes('\0')) throw badRequest('A command argument cannot hold a NUL byte');
    fields.push(['arg', arg]);
  }
  for (const [key, value] of Object.entries(spec.environment)) {
    if (key === '' || key.includes('=') || key.includes('\0') || value.includes('\0')) throw badRequest(`Invalid environment variable "${key}"`);
    fields.push(['env', `${key}=${value}`]);
  }
  let cwd = spec.cwd || spec.environment.HOME || '/';
  if (!cwd.startsWith('/')) cwd = `/${cwd}`;
  fields.push(['cwd', cwd], ['uid', spec.user], ['gid', spec.group]);
  if (spec.interactive) fields.push(['pty', 1], ['cols', spec.width || 80], ['rows', spec.height || 25]);
  return fields;
}

export function startExecSession(link: ExecOpener, spec: ExecSpec): Promise<ExecSession> {
  const fields = execFields(spec);
  return new Promise((resolve, reject) => {
    let channel = 0;
    let started = false;
    let ended = false;
    let settle: (code: number) => void = () => {};
    const exited = new Promise<number>((done) => { settle = done; });
    const input = new CreditWindow();
    const credit = (stream: StreamId) => (bytes: number) => {
      if (!ended) link.send(channel, FrameType.Credit, creditFrame(stream, bytes));
    };
    const stdout = new IncomingStream(credit(StreamId.Out));
    const stderr = spec.interactive ? undefined : new IncomingStream(credit(StreamId.Err));
    const stdin = outgoingStream(input, {
      data: (chunk) => {
        link.send(channel, FrameType.Data, Buffer.from([StreamId.In]), chunk);
        return link.drained();
      },
      end: () => link.send(channel, FrameType.Eof, Buffer.from([StreamId.In])),
    }, () => ended);

    const end = (code: number, error?: Error) => {
      if (ended) return;
      ended = true;
      link.release(channel);
      input.fail(error ?? new AgentError('EPIPE', 'The command has exited'));
      for (const stream of [stdout, stderr]) {
        if (stream && !stream.readableEnded) stream.push(null);
      }
      settle(code);
    };

    const handler: ChannelHandler = {
      frame: (frame) => {
        switch (frame.type) {
          case FrameType.Reply: {
            const reply = new KvReply(frame.payload);
            const code = reply.get('error');
            if (code) {
              ended = true;
              link.release(channel);
              reject(new AgentError(code, reply.get('message') ?? code));
              return;
            }
            started = true;
            resolve(session);
            return;
          }
          case FrameType.Data: {
            const stream = frame.payload[0] === StreamId.Err ? stderr : stdout;
            stream?.deliver(frame.payload.subarray(1));
            return;
          }
          case FrameType.Eof: {
            const stream = frame.payload[0] === StreamId.Err ? stderr : stdout;
            stream?.finish();
            return;
          }
          case FrameType.Credit:
            if (frame.payload[0] === StreamId.In) input.add(frame.payload.readUInt32BE(1));
            return;
          case FrameType.Exit:
            end(frame.payload.readInt32BE(0));
            return;
          default:
        }
      },
      fail: (error) => {
        if (!started) {
          ended = true;
          reject(error);
        } else {
          end(KILLED, error);
        }
      },
    };

    const session: ExecSession = {
      stdin,
      stdout,
      stderr,
      resize: (cols, rows) => {
        if (ended) return;
        const size = Buffer.alloc(4);
        size.writeUInt16BE(Math.max(1, Math.min(cols, 0xffff)), 0);
        size.writeUInt16BE(Math.max(1, Math.min(rows, 0xffff)), 2);
        link.send(channel, FrameType.Resize, size);
      },
      signal: (signal) => {
        if (ended) return;
        const payload = Buffer.alloc(4);
        payload.writeUInt32BE(signal, 0);
        link.send(channel, FrameType.Signal, payload);
      },
      terminate: () => {
        if (ended) return;
        // The agent kills the command's process group and forgets the channel: no exit follows.
        link.send(channel, FrameType.Close);
        end(KILLED);
      },
      exited,
    };

    link.open(fields, handler).then((id) => { channel = id; }, reject);
  });
}
