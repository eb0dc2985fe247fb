/**
 * HostTools.launch through corral-spawner (kernel/host-tools/spawner.c): children started beside the
 * event loop keep what spawn gives (streams both ways, exit codes and signals, environment, working
 * directory, a child that cannot start), end with the daemon when asked (the helper stands in for it
 * here), and take no stream from a connection that does not bring the child's token.
 */
import test from 'ava';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { spawn as spawnChild } from 'node:child_process';
import { createConnection, createServer, type Socket } from 'node:net';
import bunyan from 'bunyan';
import { createHostTools } from '../../kernel/host-tools/host-tools.js';
import { SpawnedChild, Spawner } from '../../kernel/host-tools/spawner.js';
import type { HostProcess } from '../../sdk/index.js';

const tools = createHostTools(bunyan.createLogger({ name: 'spawner-test', level: 'fatal' }));
const launch = tools.launch!;

const read = (stream: NodeJS.ReadableStream) => new Promise<string>((resolve) => {
  let text = '';
  stream.on('data', (chunk) => (text += String(chunk)));
  stream.on('end', () => resolve(text));
});

const parentOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
const commOf = (pid: number) => readFileSync(`/proc/${pid}/comm`, 'utf8').trim();

test('a launched child gets its input, arguments, environment and directory, and its output and exit code come back', async (t) => {
  const proc = await launch('sh', ['-c', 'read line; echo "out:$line:$1"; echo "err:$GREETING" >&2; pwd; exit 3', 'sh', 'arg with spaces'], {
    cwd: '/tmp', env: { PATH: process.env.PATH!, GREETING: 'hé' },
  });
  t.true(proc.pid > 0);
  // Started by the helper, not by this process.
  t.is(commOf(parentOf(proc.pid)), 'corral-spawner');
  const [out, err] = [read(proc.stdout), read(proc.stderr!)];
  proc.stdin.end('hello\n');
  t.is(await proc.exited, 3);
  t.is(await out, 'out:hello:arg with spaces\n/tmp\n');
  t.is(await err, 'err:hé\n');
});

test('a child that exits at once keeps its output for the caller that reads it once launch resolves', async (t) => {
  // Its start and its end often come in one answer of the helper: the output must wait for the caller.
  const lost: string[] = [];
  for (let round = 0; round < 10; round++) {
    await Promise.all(Array.from({ length: 16 }, async () => {
      const proc = await launch('sh', ['-c', 'echo said >&2; exit 1'], {});
      proc.stdin.end();
      const err = read(proc.stderr!);
      t.is(await proc.exited, 1);
      if ((await err) !== 'said\n') lost.push(await err);
    }));
  }
  t.deepEqual(lost, []);
});

test('without an environment the child gets the daemon\'s; a signal ends it as under spawn', async (t) => {
  const proc = await launch('sh', ['-c', 'echo "$HOME"; exec sleep 30']);
  const first = await new Promise<string>((resolve) => proc.stdout.once('data', (c) => resolve(String(c))));
  t.is(first.trim(), process.env.HOME ?? "");
  proc.kill('SIGTERM');
  t.is(await proc.exited, 128 + 15);
});

test.serial('no connection outlives its child, whether its input was ended, left open or the child killed', async (t) => {
  const fds = () => readdirSync('/proc/self/fd').length;
  // The first launch starts the helper and its socket: those stay, the children's connections must not.
  await (await launch('true', [])).exited;
  const before = fds();
  for (let i = 0; i < 60; i++) {
    const proc = await launch('sh', ['-c', i % 2 ? 'echo out; echo err >&2' : 'cat']);
    proc.stdout.resume();
    proc.stderr!.resume();
    if (i % 3 === 0) proc.stdin.end('x');
    else if (i % 2 === 0) proc.kill('SIGKILL');
    await proc.exited;
  }
  const deadline = Date.now() + 2_000;
  while (fds() > before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.true(fds() <= before, `${fds()} fds open after the children, ${before} before`);
});

test('an idle helper is let go, and the next child starts a new one', async (t) => {
  const spawner = new Spawner(undefined, 200);
  const first = spawner.start('sleep', ['0.3'])!;
  await new Promise((resolve) => first.once('spawn', resolve));
  const helper = parentOf(first.pid!);
  await new Promise((resolve) => first.once('close', resolve));
  const deadline = Date.now() + 3_000;
  while (existsSync(`/proc/${helper}`) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.false(existsSync(`/proc/${helper}`), 'the idle helper exited');
  const second = spawner.start('sh', ['-c', 'echo again'])!;
  t.truthy(second);
  const output = read(second.stdout);
  t.is(await output, 'again\n');
  spawner.stop();
});

test('a command that cannot start resolves with pid -1 and exit 127', async (t) => {
  const proc = await launch('/nonexistent/command', []);
  t.is(proc.pid, -1);
  t.is(await proc.exited, 127);
});

test('children asked to end with the daemon die with the helper; the others live on', async (t) => {
  const spawner = new Spawner();
  const bound = spawner.start('sleep', ['300'], { endWithDaemon: true })!;
  const free = spawner.start('sleep', ['300'])!;
  await Promise.all([bound, free].map((c) => new Promise((resolve) => c.once('spawn', resolve))));
  // Their streams reach the daemon a moment after they start.
  const streamsBy = Date.now() + 2_000;
  while (!(bound.complete && free.complete) && Date.now() < streamsBy) await new Promise((r) => setTimeout(r, 10));
  const helper = parentOf(bound.pid!);
  t.is(commOf(helper), 'corral-spawner');
  const closed = Promise.all([bound, free].map((c) => new Promise((resolve) => c.once('close', resolve))));
  process.kill(helper, 'SIGKILL');
  const deadline = Date.now() + 5_000;
  while (existsSync(`/proc/${bound.pid}`) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  try {
    t.false(existsSync(`/proc/${bound.pid}`), 'the bound child was killed with the helper');
    t.true(existsSync(`/proc/${free.pid}`), 'an unbound child lives on');
  } finally {
    try { process.kill(free.pid!, 'SIGKILL'); } catch { /* gone */ }
  }
  // Both are reported over (their ends unknown) once the helper is gone.
  await closed;
  t.pass();
});

test('a connection without a child\'s token gets nothing, and the child\'s output stays its own', async (t) => {
  const spawner = new Spawner();
  const child = spawner.start('sh', ['-c', 'sleep 0.5; echo mine'])!;
  await new Promise((resolve) => child.once('spawn', resolve));
  const output = read(child.stdout);
  const name = (spawner as unknown as { name: string }).name;
  const byToken = (spawner as unknown as { byToken: Map<string, unknown> }).byToken;
  const deadline = Date.now() + 2_000;
  while (byToken.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  const attempt = (intro: string) => new Promise<string>((resolve) => {
    const socket = createConnection(`\0${name}`, () => socket.write(intro));
    let got = '';
    socket.on('data', (c) => (got += String(c)));
    socket.on('close', () => resolve(got));
    socket.on('error', () => resolve(got));
    setTimeout(() => socket.destroy(), 2_000);
  });
  // Once the child's three streams are attached its token is forgotten; a guess is refused like it.
  t.is(byToken.size, 0);
  t.is(await attempt(`${'0'.repeat(32)} 1\n`), '');
  t.is(await attempt('not an introduction at all, and longer than any introduction could be\n'), '');
  t.is(await output, 'mine\n');
  spawner.stop();
});

test('spawn keeps its pid at once (node starts the child): launch is the one that waits', async (t) => {
  const proc: HostProcess = tools.spawn('sleep', ['30']);
  t.true(proc.pid > 0);
  t.is(commOf(parentOf(proc.pid)), commOf(process.pid));
  proc.kill('SIGKILL');
  t.is(await proc.exited, 128 + 9);
});

test('an input connection that arrives after the exit is ended: a grandchild reading it is not left waiting', async (t) => {
  // Under load the helper's word of the exit can come before the daemon read the input's introduction.
  // The child here is `sh -c cat`'s sh, dead already; cat (forked by sh) holds the input's other end.
  const cat = spawnChild('cat', [], { stdio: ['pipe', 'ignore', 'ignore'] });
  const child = new SpawnedChild();
  child.started(cat.pid!);
  child.ended(null, 'SIGKILL');
  const [ours, theirs] = await socketPair();
  t.true(child.attach(0, ours));
  theirs.pipe(cat.stdin!);
  const code = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => {
      cat.kill('SIGKILL');
      resolve(-1);
    }, 3_000);
    cat.once('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  t.is(code, 0, 'cat read the end of its input and exited');
});

/** Two ends of a real unix stream connection. */
async function socketPair(): Promise<[Socket, Socket]> {
  const name = `\0corral-spawner-test-${process.pid}-${Date.now()}`;
  let accepted!: (s: Socket) => void;
  const server = createServer((s) => accepted(s));
  await new Promise<void>((resolve) => server.listen(name, resolve));
  const ours = new Promise<Socket>((resolve) => (accepted = resolve));
  const theirs = createConnection(name);
  const pair: [Socket, Socket] = [await ours, theirs];
  server.close();
  return pair;
}

test('run() starts its commands through the helper too, with no setpriv in front when they end with the daemon', async (t) => {
  // The command reports its own parent: the helper, where node's child_process would have been this process.
  const r = await tools.run('sh', ['-c', 'cat /proc/$PPID/comm; cat /proc/$$/comm'], { endWithDaemon: true });
  t.deepEqual(r.stdout.split('\n'), ['corral-spawner', 'sh']);
});

test('a request longer than the helper reads (4,096 fields) is started by node instead, and still runs', async (t) => {
  const many = Array.from({ length: 5000 }, (_, i) => `a${i}`);
  t.is(new Spawner().start('true', many), undefined);
  const r = await tools.run('sh', ['-c', 'echo $#; cat /proc/$PPID/comm', 'sh', ...many]);
  t.deepEqual(r.stdout.split('\n'), ['5000', 'node']);
});
