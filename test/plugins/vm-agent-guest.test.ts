/**
 * The guest agent inside a real VM: the test VM image booted under QEMU (TCG) straight from the
 * test, no daemon, with the config share carrying the agent binary and its virtio-serial port on
 * a unix socket, as the qemu driver sets them up. Exec (exit code, stdin, pty), files (a 1 MiB
 * push and pull, modes, owners, listing, delete) and state go through the host-side client; the
 * agent-ready time from QEMU's start and the exec round trip are measured and logged.
 */
import anyTest, { type TestFn } from 'ava';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { AgentClient } from '../../plugins/instance-qemu/agent/client.js';
import { agentFiles } from '../../plugins/instance-qemu/agent/instance-files.js';
import { agentBinary } from '../helpers/agent-relay.js';
import { collect, finish } from '../helpers/agent-io.js';
import { bootDisk, testVmImage, vmProblem, type BootedGuest } from '../helpers/vm-image.js';
import { waitFor } from '../helpers/daemon.js';

const problem = vmProblem() ?? (existsSync(agentBinary) ? undefined : `${agentBinary} is missing (npm run build makes it)`);
const test = (problem ? anyTest.skip : anyTest.serial) as TestFn;
if (problem) console.log(`vm-agent-guest: skipped: ${problem}`);

const env = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', HOME: '/root' };
let work: string;
let guest: BootedGuest | undefined;
let agent: AgentClient;
let readyMs = 0;

anyTest.before(async () => {
  if (problem) return;
  const image = await testVmImage();
  // Short: the agent's socket path must fit in a unix socket address.
  work = mkdtempSync('/tmp/vmag-');
  mkdirSync(path.join(work, 'config'));
  copyFileSync(agentBinary, path.join(work, 'config', 'agent'));
  const socket = path.join(work, 'agent.sock');
  guest = bootDisk(image.rootfs, work, 'agentvm', [
    '-device', 'virtio-serial-pci',
    '-chardev', `socket,id=agent,path=${socket},server=on,wait=off`,
    '-device', 'virtserialport,chardev=agent,name=org.corral.agent',
  ]);
  const started = Date.now();
  await waitFor(() => existsSync(socket), 10_000, 'QEMU to open the agent socket');
  agent = new AgentClient(socket);
  try {
    await agent.ready(60_000);
  } catch (err) {
    throw new Error(`${(err as Error).message}; console:\n${guest.console().slice(-3000)}`);
  }
  readyMs = Date.now() - started;
});

anyTest.after.always(async () => {
  agent?.close();
  if (guest) {
    guest.kill();
    await guest.exited;
  }
  if (work) rmSync(work, { recursive: true, force: true });
});

const run = (command: string[], extra: Partial<Parameters<AgentClient['exec']>[0]> = {}) =>
  agent.exec({ command, environment: env, interactive: false, ...extra });

test('agent-ready from QEMU start, and the exec round trip', async (t) => {
  t.log(`agent ready ${readyMs} ms after QEMU started (TCG)`);
  const times: number[] = [];
  for (let i = 0; i < 20; i++) {
    const start = process.hrtime.bigint();
    const result = await finish(await run(['true']));
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
    t.is(result.code, 0);
  }
  times.sort((a, b) => a - b);
  t.log(`exec round trip (true): median ${times[10]!.toFixed(1)} ms, min ${times[0]!.toFixed(1)} ms, max ${times[19]!.toFixed(1)} ms`);
  t.true(readyMs > 0);
});

test('exec in the guest: exit code, outputs, stdin, env, cwd, user', async (t) => {
  t.deepEqual(await finish(await run(['sh', '-c', 'echo out; echo err >&2; exit 3'])), { code: 3, stdout: 'out\n', stderr: 'err\n' });
  t.is((await finish(await run(['cat']), 'stdin reaches the guest')).stdout, 'stdin reaches the guest');
  const context = await finish(await run(['sh', '-c', 'echo "$X $(pwd) $(id -u):$(id -g) $(hostname)"'], {
    environment: { ...env, X: 'x' }, cwd: '/tmp', user: 1000, group: 1000,
  }));
  t.is(context.stdout, 'x /tmp 1000:1000 agentvm\n');
  t.is((await finish(await run(['no-such-command']))).code, 127);
});

test('exec under a pty in the guest: a terminal, its size, input', async (t) => {
  const session = await run(['sh', '-c', 'tty; stty size; read a; echo "got $a"'], { interactive: true, width: 90, height: 20 });
  let seen = '';
  session.stdout.on('data', (chunk: Buffer) => { seen += chunk.toString(); });
  await waitFor(() => seen.includes('20 90'), 10_000, 'the size');
  session.stdin.write('typed\n');
  t.is(await session.exited, 0);
  await waitFor(() => seen.includes('got typed'), 5000, 'the echo');
  t.regex(seen, /\/dev\/pts\/\d+/);
});

test('files in the guest: 1 MiB push and pull, modes, owners, listing, delete', async (t) => {
  const content = randomBytes(1024 * 1024);
  const files = agentFiles(agent);
  const pushStart = Date.now();
  await files.put('/root/blob', { type: 'file', uid: 1000, gid: 1001, mode: 0o600, append: false, content: Readable.from([content]) });
  const pushMs = Date.now() - pushStart;
  const pullStart = Date.now();
  const pulled = await files.get('/root/blob');
  if (pulled.kind !== 'file') throw new Error('not a file');
  const back = Buffer.concat(await pulled.content.toArray() as Buffer[]);
  t.log(`1 MiB push ${pushMs} ms, pull ${Date.now() - pullStart} ms`);
  t.true(back.equals(content));
  t.like(pulled.info, { kind: 'file', uid: 1000, gid: 1001, mode: 0o600 });
  t.is((await finish(await run(['sh', '-c', 'stat -c "%a %u %g %s" /root/blob']))).stdout, `600 1000 1001 ${content.length}\n`);

  await files.put('/root/a/b', { type: 'directory', mode: 0o750, uid: 0, gid: 0, append: false });
  await files.put('/root/a/b/link', { type: 'symlink', target: '/root/blob', append: false });
  const listing = await files.get('/root/a/b');
  t.true(listing.kind === 'directory' && listing.entries.includes('link'));
  const link = await files.get('/root/a/b/link');
  t.true(link.kind === 'symlink' && link.target === '/root/blob');

  await files.delete('/root/a/b/link');
  await files.delete('/root/blob');
  const gone = await t.throwsAsync(files.get('/root/blob'));
  t.is((gone as unknown as { code: string }).code, 'ENOENT');
  t.is((await finish(await run(['ls', '/root/a/b']))).stdout, '');
});

test('state of the guest: processes, memory, CPU, interfaces', async (t) => {
  const state = await agent.state();
  t.true(state.processes > 3);
  t.true(state.memory.total > 100 * 1024 * 1024 && state.memory.total <= 256 * 1024 * 1024);
  t.true(state.cpuNs > 0);
  t.true(state.network.lo!.addresses.some((a) => a.address === '127.0.0.1'));
  t.log(`guest: ${state.processes} processes, memory ${Math.round(state.memory.usage / 1048576)}/${Math.round(state.memory.total / 1048576)} MiB`);
});

test('the agent in the guest survives the host side reconnecting, even in the middle of a stream', async (t) => {
  const before = await collect((await run(['echo', 'one'])).stdout);
  t.is(before, 'one\n');
  // Output in flight when the connection drops: the next connection may begin mid-frame.
  const flood = await run(['cat', '/dev/zero']);
  await new Promise<void>((resolve) => flood.stdout.once('data', () => resolve()));
  const second = new AgentClient(path.join(work, 'agent.sock'));
  agent.close();
  t.is(await flood.exited, 137);
  agent = second;
  await agent.ready(20_000);
  t.is((await finish(await run(['echo', 'two']))).stdout, 'two\n');
  // The new greeting ended the old session in the guest.
  t.is((await finish(await run(['sh', '-c', 'ps | grep -c "[c]at /dev/zero"']))).stdout, '0\n');
});
