/**
 * corral as a service: `corrald waitready` (before, after and without a daemon, its timeout) and
 * `corrald shutdown` (the systemd unit's ExecStop: instances stop by boot.stop.priority, as at a host
 * shutdown, the daemon exits 0, and the next start brings them back), driven with the real lxc client.
 */
import test from 'ava';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { collect, killContainers, projectRoot, startDaemon, unixWebsocket, startWithPool, stopDaemons, waitFor } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { lxcOk } from '../helpers/clients.js';
import { referenceUnavailable, startReference } from '../helpers/reference-daemon.js';
import { spawn } from 'node:child_process';
import { corraldCli } from '../helpers/corrald-cli.js';

let image: BusyboxImage;
/**
 * The events of an instance that stopped at a host shutdown. The reference says instance-stopped
 * when the clean stop ran out of its timeout and it killed the instance (busybox's init ignores
 * SIGPWR), corral instance-shutdown: the order is what these tests compare (see decision 0035).
 */
const STOP_ACTIONS = new Set(['instance-shutdown', 'instance-stopped']);
const dirs: string[] = [];
const scratch = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-svc-'));
  dirs.push(dir);
  return dir;
};

test.before(() => {
  image = buildBusyboxImage('gzip');
});

test.after.always(async () => {
  await stopDaemons();
  for (const dir of dirs) {
    killContainers(dir);
    rmSync(dir, { recursive: true, force: true });
  }
  rmSync(image.dir, { recursive: true, force: true });
});

test.serial('waitready waits for a daemon that starts later, answers at once once it runs, and gives up at --timeout with a message', async (t) => {
  const dir = scratch();
  const early = corraldCli(['waitready', '--dir', dir, '--timeout', '60']);
  let earlyDone = false;
  void early.then(() => (earlyDone = true));
  await new Promise((r) => setTimeout(r, 500));
  t.false(earlyDone, 'nothing answers yet: still waiting');
  const d = await startDaemon({ plugins: 'edge', dir });
  const waited = await early;
  t.is(waited.status, 0, waited.stderr);

  const after = await corraldCli(['waitready', '--dir', dir, '-t', '5']);
  t.is(after.status, 0, after.stderr);
  t.is(await d.stop(), 0);

  const none = scratch();
  const gaveUp = await corraldCli(['waitready', '--dir', none, '--timeout', '1']);
  t.is(gaveUp.status, 1);
  t.regex(gaveUp.stderr, new RegExp(`did not answer within 1 s`));
  t.true(gaveUp.ms < 8000, `gave up after ${gaveUp.ms} ms`);

  const noDaemon = await corraldCli(['shutdown', '--dir', none]);
  t.is(noDaemon.status, 1);
  t.regex(noDaemon.stderr, /no daemon answers on .*unix\.socket/);
});

test.serial('waitready and shutdown refuse bad flags with exit 2 and their usage', async (t) => {
  for (const args of [['waitready', '--bogus'], ['shutdown', '--timeout', 'soon'], ['waitready', 'extra'], ['shutdown', '--dir']]) {
    const res = await corraldCli(args);
    t.is(res.status, 2, `${args.join(' ')}: ${res.stderr}`);
    t.regex(res.stderr, new RegExp(`^corrald ${args[0]}: .+\\nUsage: corrald ${args[0]} `), args.join(' '));
  }
  const help = await corraldCli(['shutdown', '--help']);
  t.is(help.status, 0);
  t.regex(help.stdout, /--dir <path>[\s\S]*--timeout <s>/);
});

test.serial('corrald shutdown stops the instances by boot.stop.priority (as a host shutdown), the daemon exits 0, and the next start brings them back', async (t) => {
  const dir = scratch();
  let d = await startWithPool({ dir });
  await lxcOk(t, d.socket, 'image', 'import', image.unified, '--alias', 'bb');
  // Higher priorities stop first; each within its boot.host_shutdown_timeout (busybox's init ignores SIGPWR).
  const priorities: Record<string, string> = { low: '1', high: '10', middle: '5' };
  for (const [name, priority] of Object.entries(priorities)) {
    await lxcOk(t, d.socket, 'launch', 'bb', name, '-c', `boot.stop.priority=${priority}`, '-c', 'boot.host_shutdown_timeout=1');
  }
  const events = collect(await d.websocket('/1.0/events?type=lifecycle'));
  const exit = new Promise<number | null>((resolve) => d.child.once('exit', (code) => resolve(code)));

  const asked = await corraldCli(['shutdown', '--dir', dir, '--timeout', '90']);
  t.is(asked.status, 0, asked.stderr);
  t.is(await exit, 0, 'the daemon exits 0');
  t.false(existsSync(path.join(dir, 'unix.socket')), 'shutdown returns once the daemon is gone');
  const stops = events.filter((e) => STOP_ACTIONS.has(e.metadata.action)).map((e) => e.metadata.source.split('/').pop());
  t.deepEqual(stops, ['high', 'middle', 'low']);
  t.regex(d.output(), /"msg":"asked to shut down through the unix socket"/);

  d = await startDaemon({ plugins: 'edge', dir });
  const status = async (name: string) => (await d.request('GET', `/1.0/instances/${name}`)).json.metadata.status;
  await waitFor(async () => (await Promise.all(Object.keys(priorities).map(status))).every((s) => s === 'Running'), 30000, 'the instances to start again');
  t.pass();
  for (const name of Object.keys(priorities)) await lxcOk(t, d.socket, 'stop', '-f', name);
  await d.stop();
});

test.serial('the reference\'s `lxd shutdown` (oracle): the same order by boot.stop.priority, and it returns once the daemon is gone', async (t) => {
  const why = referenceUnavailable();
  if (why) return t.pass(why);
  const ref = await startReference();
  try {
    t.is((await ref.lxc('image', 'import', image.unified, '--alias', 'bb')).status, 0);
    for (const [name, priority] of Object.entries({ low: '1', high: '10', middle: '5' })) {
      const launched = await ref.lxc('launch', 'bb', `h16svc-${name}`, '-c', `boot.stop.priority=${priority}`, '-c', 'boot.host_shutdown_timeout=1');
      t.is(launched.status, 0, launched.stderr);
    }
    const events = collect(await unixWebsocket(ref.socket, '/1.0/events?type=lifecycle'));
    const hostPath = (process.env.PATH ?? '').split(':').filter((p) => !p.includes('node_modules')).join(':');
    const code = await new Promise<number | null>((resolve) => {
      spawn('lxd', ['shutdown', '--timeout', '90'], { env: { ...process.env, PATH: hostPath, LXD_DIR: ref.dir }, stdio: 'ignore' }).on('exit', resolve);
    });
    t.is(code, 0);
    t.false(existsSync(ref.socket), 'gone when lxd shutdown returns');
    const stops = events.filter((e) => STOP_ACTIONS.has(e.metadata.action)).map((e) => e.metadata.source.split('/').pop());
    t.deepEqual(stops, ['h16svc-high', 'h16svc-middle', 'h16svc-low']);
  } finally {
    await ref.stop();
  }
});

test.serial('the shutdown route is served on the unix socket only: not over HTTPS, not in the route table, no other method', async (t) => {
  const d = await startDaemon({ plugins: 'edge' });
  t.is((await d.request('GET', '/internal/shutdown')).status, 404);
  await lxcOk(t, d.socket, 'config', 'set', 'core.https_address', '127.0.16.61:8443');
  const overTls = await new Promise<number>((resolve, reject) => {
    const req = https.request({ host: '127.0.16.61', port: 8443, method: 'PUT', path: '/internal/shutdown', rejectUnauthorized: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
  t.is(overTls, 404);
  t.is((await d.request('GET', '/1.0')).status, 200, 'still running');
  t.false(readFileSync(path.join(projectRoot, 'docs', 'routes.md'), 'utf8').includes('/internal/shutdown'));
  t.is(await d.stop(), 0);
});
