/**
 * The guest agent binary (dist/plugins/instance-qemu/guest/corral-agent) run on the host, reached through the host-side
 * client (plugins/instance-qemu/agent/client.ts) over a relay that behaves as QEMU's virtio-serial
 * socket does: exec with pipes and a pty, signals, process-group kill, back-pressure both ways,
 * files, state, and a daemon-side reconnect and a garbled byte stream that the agent survives.
 */
import test from 'ava';
import { chmodSync, chownSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { AgentClient } from '../../plugins/instance-qemu/agent/client.js';
import { AgentRelay, agentBinary } from '../helpers/agent-relay.js';
import { collect, finish } from '../helpers/agent-io.js';
import { waitFor } from '../helpers/daemon.js';
import { processesWith } from '../helpers/processes.js';

const env = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/root' };
const marker = 50000 + Math.floor(Math.random() * 20000);
let relay: AgentRelay;
let agent: AgentClient;
let work: string;

test.before(async () => {
  if (!existsSync(agentBinary)) throw new Error(`${agentBinary} is missing: run npm run build`);
  relay = new AgentRelay();
  await relay.start();
  agent = new AgentClient(relay.hostPath);
  await agent.ready(10_000);
  work = mkdtempSync(path.join(os.tmpdir(), 'agent-files-'));
});

test.after.always(async () => {
  agent?.close();
  await relay?.stop();
  for (const p of processesWith(`sleep ${marker}`)) process.kill(p.pid, 'SIGKILL');
  if (work) rmSync(work, { recursive: true, force: true });
});

/** The test's own sleeps (not the shells that started them). */
const sleepers = () => processesWith(`sleep ${marker}`).filter((p) => p.cmdline === `sleep ${marker}`).length;

const run = (command: string[], extra: Partial<Parameters<AgentClient['exec']>[0]> = {}) =>
  agent.exec({ command, environment: env, interactive: false, ...extra });

test.serial('exec: exit code, separate outputs, stdin, env, cwd, uid and gid', async (t) => {
  const shell = await finish(await run(['sh', '-c', 'echo out; echo err >&2; exit 7']));
  t.deepEqual(shell, { code: 7, stdout: 'out\n', stderr: 'err\n' });

  const cat = await finish(await run(['cat']), 'through stdin');
  t.is(cat.stdout, 'through stdin');
  t.is(cat.code, 0);

  const context = await finish(await run(['sh', '-c', 'echo "$GREETING $(pwd) $(id -u):$(id -g)"'], {
    environment: { ...env, GREETING: 'hi' }, cwd: '/tmp', user: 1234, group: 4321,
  }));
  t.is(context.stdout, 'hi /tmp 1234:4321\n');

  // A missing working directory falls back to `/`; a missing command exits 127.
  t.is((await finish(await run(['pwd'], { cwd: '/no/such/dir' }))).stdout, '/\n');
  t.is((await finish(await run(['no-such-command-here']))).code, 127);
});

test.serial('exec under a pty: one terminal stream, its size and resize', async (t) => {
  const session = await run(['sh', '-c', 'stty size; read line; stty size; echo "got $line"'], { interactive: true, width: 100, height: 30 });
  t.is(session.stderr, undefined);
  let seen = '';
  session.stdout.on('data', (chunk: Buffer) => { seen += chunk.toString(); });
  await waitFor(() => seen.includes('30 100'), 5000, 'first size');
  session.resize(120, 40);
  session.stdin.write('hello\n');
  t.is(await session.exited, 0);
  await waitFor(() => seen.includes('got hello'), 5000, 'echo');
  t.regex(seen, /40 120/);

  // End of input on a terminal is ^D: cat sees it and ends.
  const cat = await run(['cat'], { interactive: true });
  cat.stdin.end('line\n');
  t.is(await cat.exited, 0);
});

test.serial('exec: a signal reaches the command; terminate kills what it started', async (t) => {
  const sleeper = await run(['sleep', String(marker)]);
  sleeper.stdin.end();
  await waitFor(() => sleepers() === 1, 5000, 'sleep to start');
  sleeper.signal(15);
  t.is(await sleeper.exited, 143);

  const tree = await run(['sh', '-c', `sleep ${marker} & sleep ${marker}; echo never`]);
  await waitFor(() => sleepers() === 2, 5000, 'both sleeps');
  tree.terminate();
  t.is(await tree.exited, 137);
  await waitFor(() => sleepers() === 0, 5000, 'the process group to die');
  t.pass();
});

test.serial('exec: output waits for a slow reader (bounded buffering), input for the agent', async (t) => {
  const big = await run(['head', '-c', String(16 * 1024 * 1024), '/dev/zero']);
  big.stdin.end();
  await new Promise((resolve) => setTimeout(resolve, 500));
  // Nobody read yet: what waits on our side is bounded by the window (and the stream's buffer).
  t.true(big.stdout.readableLength <= 512 * 1024, `buffered ${big.stdout.readableLength}`);
  // Nor does the agent buffer it: the command waits on its own pipe.
  const agentRss = Number(readFileSync(`/proc/${relay.agent!.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/)?.[1]);
  t.true(agentRss < 8 * 1024, `agent RSS ${agentRss} kB`);
  let total = 0;
  for await (const chunk of big.stdout) total += (chunk as Buffer).length;
  t.is(total, 16 * 1024 * 1024);
  t.is(await big.exited, 0);

  const payload = randomBytes(4 * 1024 * 1024);
  const counter = await run(['sh', '-c', 'wc -c']);
  Readable.from([payload]).pipe(counter.stdin);
  t.is((await collect(counter.stdout)).trim(), String(payload.length));
  t.is(await counter.exited, 0);
});

test.serial('limits: at most 64 channels at once (EMFILE beyond); a stopped agent is a bounded wait', async (t) => {
  const sessions = await Promise.all(Array.from({ length: 64 }, () => run(['sleep', String(marker)])));
  const refused = await t.throwsAsync(run(['true']));
  t.is((refused as unknown as { code: string }).code, 'EMFILE');
  for (const session of sessions) session.terminate();
  await waitFor(() => sleepers() === 0, 10_000, 'the sleeps to be killed');
  t.is((await finish(await run(['echo', 'room again']))).stdout, 'room again\n');

  // A guest that answers nothing (paused, wedged): the state request gives up, then works again.
  relay.agent!.kill('SIGSTOP');
  const started = Date.now();
  const stuck = await t.throwsAsync(agent.state());
  t.is((stuck as unknown as { code: string }).code, 'ETIMEDOUT');
  t.true(Date.now() - started < 10_000);
  relay.agent!.kill('SIGCONT');
  t.true((await agent.state()).processes > 0);
});

test.serial('exec: many sessions at once on one connection', async (t) => {
  const results = await Promise.all(Array.from({ length: 20 }, async (_, i) => finish(await run(['sh', '-c', `echo ${i}; exit ${i % 5}`]))));
  results.forEach((result, i) => {
    t.is(result.stdout, `${i}\n`);
    t.is(result.code, i % 5);
  });
});

test.serial('files: write with mode and owner, append, read back, list, symlinks, delete, errno names', async (t) => {
  const file = path.join(work, 'blob');
  const content = randomBytes(1024 * 1024);
  await agent.write(file, { kind: 'file', mode: 0o640, uid: 1000, gid: 1001, content: Readable.from([content]) });
  t.true(readFileSync(file).equals(content));
  const st = statSync(file);
  t.is(st.mode & 0o7777, 0o640);
  t.is(st.uid, 1000);
  t.is(st.gid, 1001);
  t.like(await agent.stat(file), { kind: 'file', mode: 0o640, uid: 1000, gid: 1001 });

  await agent.write(file, { kind: 'file', mode: 0o640, uid: 1000, gid: 1001, append: true, content: Readable.from([Buffer.from('tail')]) });
  t.is(statSync(file).size, content.length + 4);

  const read = await agent.readFile(file);
  const chunks: Buffer[] = [];
  for await (const chunk of read.content) chunks.push(chunk as Buffer);
  t.true(Buffer.concat(chunks).equals(Buffer.concat([content, Buffer.from('tail')])));

  await agent.write(path.join(work, 'sub'), { kind: 'directory', mode: 0o711, uid: 5, gid: 6 });
  t.is(statSync(path.join(work, 'sub')).mode & 0o7777, 0o711);
  await agent.write(path.join(work, 'link'), { kind: 'symlink', mode: 0o777, uid: 0, gid: 0, target: 'blob' });
  t.is(readlinkSync(path.join(work, 'link')), 'blob');
  t.is((await agent.readLink(path.join(work, 'link'))).target, 'blob');
  t.is((await agent.stat(path.join(work, 'link'))).kind, 'symlink');

  writeFileSync(path.join(work, 'sub', 'inner'), 'x');
  const listing = await agent.readDirectory(work);
  t.deepEqual(listing.entries.sort(), ['blob', 'link', 'sub']);
  t.is(listing.info.kind, 'directory');

  const notEmpty = await t.throwsAsync(agent.remove(path.join(work, 'sub')));
  t.is((notEmpty as unknown as { code: string }).code, 'ENOTEMPTY');
  await agent.remove(path.join(work, 'sub', 'inner'));
  await agent.remove(path.join(work, 'sub'));
  await agent.remove(path.join(work, 'link'));
  t.false(existsSync(path.join(work, 'sub')));
  t.throws(() => lstatSync(path.join(work, 'link')));

  const missing = await t.throwsAsync(agent.stat(path.join(work, 'nothing')));
  t.is((missing as unknown as { code: string }).code, 'ENOENT');
  const notDir = await t.throwsAsync(agent.write(path.join(work, 'nothing', 'x'), { kind: 'file', mode: 0o644, uid: 0, gid: 0, content: Readable.from([Buffer.from('x')]) }));
  t.is((notDir as unknown as { code: string }).code, 'ENOENT');
  const isDir = await t.throwsAsync(agent.readFile(work));
  t.is((isDir as unknown as { code: string }).code, 'EISDIR');
});

test.serial('files: a replacement is whole or not at all; kept owner and mode; a write through a symlink', async (t) => {
  const file = path.join(work, 'kept');
  writeFileSync(file, 'old content');
  chownSync(file, 321, 654);
  chmodSync(file, 0o604);
  // An upload that breaks off: the old file stays as it was, and nothing is left beside it.
  const broken = new Readable({ read() {} });
  broken.push(randomBytes(300 * 1024));
  setTimeout(() => broken.destroy(new Error('the client went away')), 100);
  await t.throwsAsync(agent.write(file, { kind: 'file', mode: -1, uid: -1, gid: -1, content: broken }));
  await waitFor(() => readdirSync(work).every((name) => !name.startsWith('.corral-write-')), 5000, 'the partial file to go');
  t.is(readFileSync(file, 'utf8'), 'old content');

  // -1: the replacement takes the old file's owner and mode.
  await agent.write(file, { kind: 'file', mode: -1, uid: -1, gid: -1, content: Readable.from([Buffer.from('new content')]) });
  t.is(readFileSync(file, 'utf8'), 'new content');
  t.like(statSync(file), { uid: 321, gid: 654 });
  t.is(statSync(file).mode & 0o7777, 0o604);

  // Through a symlink: the file it points to is written, the link stays.
  symlinkSync('kept', path.join(work, 'via'));
  await agent.write(path.join(work, 'via'), { kind: 'file', mode: -1, uid: -1, gid: -1, content: Readable.from([Buffer.from('through')]) });
  t.true(lstatSync(path.join(work, 'via')).isSymbolicLink());
  t.is(readFileSync(file, 'utf8'), 'through');
  const isDir = await t.throwsAsync(agent.write(work, { kind: 'file', mode: -1, uid: -1, gid: -1, content: Readable.from([Buffer.from('x')]) }));
  t.is((isDir as unknown as { code: string }).code, 'EISDIR');
  rmSync(path.join(work, 'via'));
  rmSync(file);
});

test.serial('state: processes, memory, CPU time, interfaces with counters and addresses', async (t) => {
  const state = await agent.state();
  t.true(state.processes > 1);
  t.true(state.memory.total > 0 && state.memory.usage > 0 && state.memory.usage <= state.memory.total);
  t.true(state.cpuNs > 0);
  const lo = state.network.lo;
  t.truthy(lo);
  t.is(lo!.type, 'loopback');
  t.true(lo!.addresses.some((a) => a.family === 'inet' && a.address === '127.0.0.1' && a.netmask === '8' && a.scope === 'local'));
  t.true(lo!.counters.bytes_received >= 0);
});

test.serial('the daemon side reconnects: sessions of the old connection end, the agent serves the new one', async (t) => {
  const sleeper = await run(['sleep', String(marker)]);
  await waitFor(() => sleepers() === 1, 5000, 'sleep to start');
  relay.dropHost();
  // The session ends with the connection; the client reconnects and greets; the agent resets.
  t.is(await sleeper.exited, 137);
  await waitFor(() => agent.connected, 10_000, 'a new greeting');
  await waitFor(() => sleepers() === 0, 5000, 'the old session to be killed');
  t.is((await finish(await run(['echo', 'again']))).stdout, 'again\n');
});

test.serial('the agent survives garbage and half frames: it asks for a new greeting', async (t) => {
  // A frame header claiming a huge payload, then noise, as a confused peer would send.
  relay.injectToGuest(Buffer.concat([Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 3]), randomBytes(300)]));
  await waitFor(async () => {
    try {
      return (await finish(await run(['echo', 'alive']))).stdout === 'alive\n';
    } catch {
      return false;
    }
  }, 15_000, 'the agent to serve again');
  t.is(relay.agent?.exitCode, null);
});

test.serial('the agent survives a storm of well-framed nonsense: unknown ops, malformed bodies, frames for no channel', async (t) => {
  const frames: Buffer[] = [];
  const frame = (channel: number, type: number, payload: Buffer) => {
    const header = Buffer.alloc(9);
    header.writeUInt32BE(payload.length, 0);
    header.writeUInt32BE(channel, 4);
    header.writeUInt8(type, 8);
    frames.push(header, payload);
  };
  // Only harmless requests (nothing is run, nothing outside the work directory is touched).
  const bodies = [
    Buffer.from('op=frobnicate\0'), Buffer.from('no equals sign\0'), Buffer.from('op=stat'), Buffer.alloc(0),
    Buffer.from(`op=stat\0path=${work}\0`), Buffer.from('op=list\0path=relative\0'), Buffer.from('op=exec\0'),
    Buffer.from(`op=read\0path=${work}/none\0`), Buffer.from('op=write\0path=/\0kind=socket\0'), randomBytes(64),
  ];
  for (let i = 0; i < 400; i++) {
    const channel = 1_000_000 + Math.floor(Math.random() * 50);
    const type = 2 + Math.floor(Math.random() * 9); // OPEN..CLOSE
    const payload = type === 2 ? bodies[i % bodies.length]! : randomBytes(Math.floor(Math.random() * 12));
    frame(channel, type, payload);
  }
  relay.injectToGuest(Buffer.concat(frames));
  t.is((await finish(await run(['echo', 'still here']))).stdout, 'still here\n');
  t.is(relay.agent?.exitCode, null);
});
