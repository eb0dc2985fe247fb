/**
 * The host side of the VM guest agent: one connection per running VM to the unix socket QEMU
 * serves for the agent's virtio-serial port. It greets the agent (a nonce, answered back), runs
 * requests on numbered channels, and reconnects when the connection drops while the VM runs
 * (a daemon restart, an agent restart): every channel of a lost connection fails.
 */
import net from 'node:net';
import { Readable } from 'node:stream';
import type { ExecSession, ExecSpec } from '../../../sdk/index.js';
import type { AgentConnector, GuestAgent, GuestFileInfo, GuestFileWrite, GuestState } from './contract.js';
import { AgentError, connectionLost } from './errors.js';
import { startExecSession } from './exec-session.js';
import { CreditWindow, IncomingStream, outgoingStream } from './flow.js';
import { encodeFrame, FrameReader, helloPayload, type Frame } from './frames.js';
import { creditFrame, type AgentLink, type ChannelHandler } from './channel.js';
import { encodeKv, KvReply, type KvFields } from './kv.js';
import { FrameType, HELLO_MAGIC, PROTOCOL_VERSION, StreamId } from './protocol.js';
import { parseGuestState } from './guest-state.js';

/** How often a greeting nobody answered is sent again (the agent may not be up yet). */
const HELLO_RETRY_MS = 1_000;
/** How long after losing the connection we try again; grows to the maximum. */
const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 1_000;
/** How long a request made before the agent answered waits for it. */
const REQUEST_READY_MS = 10_000;
/** How long the agent may take to answer a request (a paused or wedged guest answers nothing). */
export const REPLY_TIMEOUT_MS = 30_000;
/** `lxc info` and listings ask for the state: they must not wait long for a guest that is stuck. */
const STATE_TIMEOUT_MS = 5_000;

function infoOf(reply: KvReply): GuestFileInfo {
  const kind = reply.get('kind');
  return {
    kind: kind === 'directory' || kind === 'symlink' ? kind : 'file',
    mode: reply.number('mode'),
    uid: reply.number('uid'),
    gid: reply.number('gid'),
    mtime: new Date(reply.number('mtime') * 1000),
  };
}

function replyError(reply: KvReply): AgentError | undefined {
  const code = reply.get('error');
  return code ? new AgentError(code, reply.get('message') ?? code) : undefined;
}

function streamByte(stream: StreamId): Buffer {
  return Buffer.from([stream]);
}

export class AgentClient implements GuestAgent, AgentLink {
  private socket: net.Socket | undefined;
  private reader = new FrameReader();
  private greeted = false;
  private closed = false;
  private nonce = 0;
  private nextChannel = 1;
  private reconnectDelay = RECONNECT_MIN_MS;
  private readonly channels = new Map<number, ChannelHandler>();
  private readonly replyTimers = new Map<number, NodeJS.Timeout>();
  private readyWaiters = new Set<(error?: Error) => void>();
  private helloTimer: NodeJS.Timeout | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private drainWaiters: (() => void)[] = [];

  constructor(private readonly socketPath: string) {
    this.connect();
  }

  get connected(): boolean {
    return this.greeted;
  }

  ready(timeoutMs: number): Promise<void> {
    if (this.greeted) return Promise.resolve();
    if (this.closed) return Promise.reject(new AgentError('ENOTCONN', 'The VM agent connection is closed'));
    return new Promise((resolve, reject) => {
      const done = (error?: Error) => {
        clearTimeout(timer);
        this.readyWaiters.delete(done);
        if (error) reject(error);
        else resolve();
      };
      const timer = setTimeout(() => done(new AgentError('ETIMEDOUT', `The VM agent did not answer within ${timeoutMs} ms`)), timeoutMs);
      this.readyWaiters.add(done);
    });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.dropConnection(new AgentError('ENOTCONN', 'The VM agent connection is closed'));
    for (const waiter of [...this.readyWaiters]) waiter(new AgentError('ENOTCONN', 'The VM agent connection is closed'));
  }

  // ---- the connection

  private connect(): void {
    if (this.closed) return;
    const socket = net.createConnection(this.socketPath);
    this.socket = socket;
    this.reader = new FrameReader();
    socket.on('connect', () => {
      this.reconnectDelay = RECONNECT_MIN_MS;
      this.greet();
    });
    socket.on('data', (chunk: Buffer) => this.receive(socket, chunk));
    socket.on('drain', () => this.wakeDrain());
    socket.on('error', () => { /* 'close' follows */ });
    socket.on('close', () => {
      if (this.socket !== socket) return;
      this.dropConnection(connectionLost());
      if (this.closed) return;
      // Unreferenced: a VM that is gone must not keep the daemon's process alive on its own.
      this.reconnectTimer = setTimeout(() => this.connect(), this.reconnectDelay).unref();
      this.reconnectDelay = Math.min(this.reconnectDelay * 2, RECONNECT_MAX_MS);
    });
  }

  /** Sends a greeting with a new nonce; repeated until the agent answers one. */
  private greet(): void {
    clearTimeout(this.helloTimer);
    if (!this.socket || this.greeted) return;
    this.nonce = (Math.random() * 0x1_0000_0000) >>> 0;
    this.reader.expectHello(this.nonce);
    this.socket.write(encodeFrame(0, FrameType.Hello, helloPayload(PROTOCOL_VERSION, this.nonce)));
    this.helloTimer = setTimeout(() => this.greet(), HELLO_RETRY_MS).unref();
  }

  private dropConnection(error: Error): void {
    clearTimeout(this.helloTimer);
    this.greeted = false;
    const socket = this.socket;
    this.socket = undefined;
    socket?.destroy();
    this.failChannels(error);
    this.wakeDrain();
  }

  private failChannels(error: Error): void {
    const channels = [...this.channels.values()];
    this.channels.clear();
    for (const channel of channels) channel.fail(error);
  }

  private receive(socket: net.Socket, chunk: Buffer): void {
    let frames: Frame[];
    try {
      frames = this.reader.push(chunk);
    } catch {
      // Out of step with the agent: start over on a new connection.
      socket.destroy();
      return;
    }
    for (const frame of frames) {
      if (this.socket !== socket) return;
      this.handle(frame);
    }
  }

  private handle(frame: Frame): void {
    if (frame.type === FrameType.Hello) {
      const version = frame.payload.readUInt16BE(HELLO_MAGIC.length);
      clearTimeout(this.helloTimer);
      if (version !== PROTOCOL_VERSION) {
        // An agent of another version: nothing it says can be trusted; the driver sees ready() time out.
        this.socket?.destroy();
        return;
      }
      this.greeted = true;
      for (const waiter of [...this.readyWaiters]) waiter();
      return;
    }
    if (frame.type === FrameType.Reset) {
      // The agent lost step with us and dropped every channel: greet again.
      this.greeted = false;
      this.failChannels(connectionLost());
      this.greet();
      return;
    }
    if (frame.type === FrameType.Reply) this.disarm(frame.channel);
    this.channels.get(frame.channel)?.frame(frame);
  }

  // ---- AgentLink

  send(channel: number, type: FrameType, ...parts: Buffer[]): void {
    this.socket?.write(encodeFrame(channel, type, ...parts));
  }

  drained(): Promise<void> {
    if (!this.socket || !this.socket.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private wakeDrain(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const wake of waiters) wake();
  }

  release(channel: number): void {
    this.channels.delete(channel);
    this.disarm(channel);
  }

  /**
   * Fails `handler` unless the agent replies on `channel` within `timeoutMs`; the agent is told to
   * drop the channel.
   */
  awaitReply(channel: number, handler: ChannelHandler, timeoutMs: number): void {
    this.disarm(channel);
    const timer = setTimeout(() => {
      this.replyTimers.delete(channel);
      if (this.channels.get(channel) !== handler) return;
      this.release(channel);
      this.send(channel, FrameType.Close);
      handler.fail(new AgentError('ETIMEDOUT', `The VM agent did not answer within ${timeoutMs} ms`));
    }, timeoutMs);
    timer.unref();
    this.replyTimers.set(channel, timer);
  }

  private disarm(channel: number): void {
    clearTimeout(this.replyTimers.get(channel));
    this.replyTimers.delete(channel);
  }

  /** Opens a channel for `handler`: waits for the agent first (bounded), then for its reply (bounded). */
  async open(fields: KvFields, handler: ChannelHandler, replyTimeoutMs = REPLY_TIMEOUT_MS): Promise<number> {
    if (!this.greeted) await this.ready(REQUEST_READY_MS);
    const channel = this.nextChannel;
    this.nextChannel = this.nextChannel >= 0x7fff_ffff ? 1 : this.nextChannel + 1;
    this.channels.set(channel, handler);
    this.send(channel, FrameType.Open, encodeKv(fields));
    if (replyTimeoutMs > 0) this.awaitReply(channel, handler, replyTimeoutMs);
    return channel;
  }

  /** A request answered by one reply. */
  private async request(fields: KvFields, timeoutMs = REPLY_TIMEOUT_MS): Promise<KvReply> {
    return new Promise<KvReply>((resolve, reject) => {
      let channel = 0;
      const handler: ChannelHandler = {
        frame: (frame) => {
          if (frame.type !== FrameType.Reply) return;
          this.release(channel);
          const reply = new KvReply(frame.payload);
          const error = replyError(reply);
          if (error) reject(error);
          else resolve(reply);
        },
        fail: reject,
      };
      this.open(fields, handler, timeoutMs).then((id) => { channel = id; }, reject);
    });
  }

  // ---- GuestAgent

  exec(spec: ExecSpec): Promise<ExecSession> {
    return startExecSession(this, spec);
  }

  async stat(path: string): Promise<GuestFileInfo> {
    return infoOf(await this.request([['op', 'stat'], ['path', path]]));
  }

  async readLink(path: string): Promise<{ info: GuestFileInfo; target: string }> {
    const reply = await this.request([['op', 'readlink'], ['path', path]]);
    return { info: infoOf(reply), target: reply.get('target') ?? '' };
  }

  async remove(path: string): Promise<void> {
    await this.request([['op', 'remove'], ['path', path]]);
  }

  async state(): Promise<GuestState> {
    return parseGuestState(await this.request([['op', 'state']], STATE_TIMEOUT_MS));
  }

  /** A request whose reply is followed by a stream of content on STREAM_OUT. */
  private readStream(fields: KvFields): Promise<{ reply: KvReply; content: IncomingStream }> {
    return new Promise((resolve, reject) => {
      let channel = 0;
      let content: IncomingStream | undefined;
      const handler: ChannelHandler = {
        frame: (frame) => {
          if (frame.type === FrameType.Reply) {
            const reply = new KvReply(frame.payload);
            const error = replyError(reply);
            if (error) {
              this.release(channel);
              reject(error);
              return;
            }
            content = new IncomingStream((bytes) => this.send(channel, FrameType.Credit, creditFrame(StreamId.Out, bytes)));
            // A consumer that gives up ends the transfer in the guest too.
            content.on('close', () => {
              if (this.channels.get(channel) !== handler) return;
              this.release(channel);
              this.send(channel, FrameType.Close);
            });
            resolve({ reply, content });
          } else if (frame.type === FrameType.Data && content && frame.payload[0] === StreamId.Out) {
            content.deliver(frame.payload.subarray(1));
          } else if (frame.type === FrameType.Eof && content) {
            this.release(channel);
            content.finish();
          }
        },
        fail: (error) => {
          if (content) content.destroy(error);
          else reject(error);
        },
      };
      this.open(fields, handler).then((id) => { channel = id; }, reject);
    });
  }

  async readFile(path: string): Promise<{ info: GuestFileInfo; content: Readable }> {
    const { reply, content } = await this.readStream([['op', 'read'], ['path', path]]);
    return { info: infoOf(reply), content };
  }

  async readDirectory(path: string): Promise<{ info: GuestFileInfo; entries: string[] }> {
    const { reply, content } = await this.readStream([['op', 'list'], ['path', path]]);
    const chunks: Buffer[] = [];
    for await (const chunk of content) chunks.push(chunk as Buffer);
    const entries = Buffer.concat(chunks).toString('utf8').split('\0').filter((name) => name !== '');
    return { info: infoOf(reply), entries };
  }

  async write(path: string, file: GuestFileWrite): Promise<void> {
    const fields: KvFields = [['op', 'write'], ['path', path], ['kind', file.kind], ['mode', file.mode], ['uid', file.uid], ['gid', file.gid]];
    if (file.kind === 'symlink') {
      await this.request([...fields, ['target', file.target ?? '']]);
      return;
    }
    if (file.kind === 'directory') {
      await this.request(fields);
      return;
    }
    await this.writeFile([...fields, ['append', file.append ? 1 : 0]], file.content ?? Readable.from([]));
  }

  /** The file's content goes on STREAM_IN within the agent's credit; the reply comes after its end. */
  private writeFile(fields: KvFields, content: Readable): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let channel = 0;
      let finished = false;
      const window = new CreditWindow();
      const finish = (error?: Error) => {
        if (finished) return;
        finished = true;
        this.release(channel);
        window.fail(error ?? new AgentError('EPIPE', 'The write ended'));
        if (error) {
          content.unpipe();
          content.resume();
          reject(error);
        } else {
          resolve();
        }
      };
      const handler: ChannelHandler = {
        frame: (frame) => {
          if (frame.type === FrameType.Credit && frame.payload[0] === StreamId.In) window.add(frame.payload.readUInt32BE(1));
          else if (frame.type === FrameType.Reply) finish(replyError(new KvReply(frame.payload)));
        },
        fail: (error) => finish(error),
      };
      this.open(fields, handler, 0).then((id) => {
        channel = id;
        const sink = outgoingStream(window, {
          data: (chunk) => {
            this.send(channel, FrameType.Data, streamByte(StreamId.In), chunk);
            return this.drained();
          },
          end: () => {
            this.send(channel, FrameType.Eof, streamByte(StreamId.In));
            // The file is closed and its owner set after the end: that answer is bounded.
            this.awaitReply(channel, handler, REPLY_TIMEOUT_MS);
          },
        }, () => finished);
        content.on('error', (error) => {
          // The upload broke off: the agent drops the half-written file's channel.
          if (!finished) this.send(channel, FrameType.Close);
          finish(error);
        });
        content.pipe(sink);
      }, reject);
    });
  }
}

export const connectAgent: AgentConnector = (socketPath) => new AgentClient(socketPath);
