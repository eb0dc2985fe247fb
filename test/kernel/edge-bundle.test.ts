/**
 * The edge set as one bundled file (scripts/build-bundle.mjs, part of `npm run build`): it starts the
 * same daemon as dist/bin/corrald.js with the edge plugins and serves the real `lxc` client: server
 * info, lists, a busybox container through its whole life, and a proxy device, whose forwarder is a
 * separate script the bundle must still find where the compiled tree keeps it.
 */
import test, { type ExecutionContext } from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { corrald, edgeNodeFlags, killContainers, mallocEnv, projectRoot, startDaemon, superviseDaemon, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxcOk } from '../helpers/clients.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { withLxcClient } from '../helpers/needs.js';
import { checkOneFile, endBundleDaemon } from '../helpers/bundle-checks.js';

const BUNDLE = path.join(projectRoot, 'dist', 'bundle', 'corrald-edge.cjs');
const serial = withLxcClient();

let d: Daemon | undefined;
let dir: string;
let image: BusyboxImage | undefined;

/**
 * The bundle as `npm run start:edge` runs it: the daemon's node flags, `--init auto`, no `--plugins`.
 * `launch` starts another entry the same way, or adds node flags.
 */
async function startBundle(
  dataDir: string, extra: string[] = [], env: NodeJS.ProcessEnv = {}, launch: { entry?: string; nodeArgs?: string[] } = {},
): Promise<{ daemon: Daemon; exited: Promise<number | null> }> {
  const child = spawn(process.execPath, [...edgeNodeFlags, ...(launch.nodeArgs ?? []), launch.entry ?? BUNDLE, '--dir', dataDir, ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...mallocEnv, CORRAL_INIT_NETWORK: 'none', ...env },
  });
  const { daemon, exited } = await superviseDaemon(child, { dir: dataDir, socket: path.join(dataDir, 'unix.socket'), where: ' (edge bundle)', stopBoundMs: 60_000, samePid: true });
  return { daemon, exited };
}

/** Processes whose parent is `pid`, with their command lines. */
function childrenOf(pid: number): string[] {
  const found: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) found.push(readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' '));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

test.before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'corral-x1-bundle-'));
});

test.after.always(() => endBundleDaemon(d, dir, image?.dir));

test.serial('npm run build writes the edge bundle as one file', (t) => {
  checkOneFile(t, BUNDLE);
});

serial('the edge bundle serves lxc info, list, profile list and storage list as the edge set does', async (t) => {
  ({ daemon: d } = await startBundle(dir, ['--init', 'auto']));
  await waitFor(async () => (await d!.request('GET', '/1.0/profiles/default')).json?.metadata?.devices?.root !== undefined, 15_000, 'the init root disk');
  const info = await lxcOk(t, d.socket, 'info');
  t.regex(info, /api_extensions:/);
  t.regex(info, /server_pid: \d+/);
  t.regex(info, /driver: lxc/);
  t.is(JSON.parse(await lxcOk(t, d.socket, 'list', '--format', 'json')).length, 0);
  t.deepEqual(JSON.parse(await lxcOk(t, d.socket, 'profile', 'list', '--format', 'json')).map((p: { name: string }) => p.name), ['default']);
  t.deepEqual(JSON.parse(await lxcOk(t, d.socket, 'storage', 'list', '--format', 'json')).map((p: { name: string; driver: string }) => `${p.name}:${p.driver}`), ['default:dir']);

  // The same API as the daemon started from the compiled tree with --plugins edge.
  const tree = await startDaemon({ plugins: 'edge' });
  try {
    const [fromTree, fromBundle] = await Promise.all([tree.request('GET', '/1.0'), d.request('GET', '/1.0')]);
    t.deepEqual(fromBundle.json.metadata.api_extensions, fromTree.json.metadata.api_extensions);
    const [treeApi, bundleApi] = await Promise.all([tree.request('GET', '/openapi.json'), d.request('GET', '/openapi.json')]);
    t.is(bundleApi.status, 200);
    t.true(Object.keys(bundleApi.json.paths).length > 20);
    t.deepEqual(Object.keys(bundleApi.json.paths).sort(), Object.keys(treeApi.json.paths).sort());
  } finally {
    await tree.stop();
  }
});

serial('a busybox container created, started, run, stopped and deleted through the edge bundle', async (t) => {
  t.truthy(d, 'the daemon of the test before');
  image = buildBusyboxImage('gzip');
  await lxcOk(t, d!.socket, 'image', 'import', image.unified, '--alias', 'bb');
  await lxcOk(t, d!.socket, 'launch', 'bb', 'x1bundle');
  t.is((await lxcOk(t, d!.socket, 'exec', 'x1bundle', '--', 'echo', 'from-the-bundle')).trim(), 'from-the-bundle');
  t.regex(await lxcOk(t, d!.socket, 'list', 'x1bundle', '--format', 'csv', '-c', 'ns'), /x1bundle,RUNNING/);

  // A proxy device's forwarder is a script of its own (dist/plugins/proxy-devices/forwarder.js), run beside the bundle.
  const listen = path.join(dir, 'x1-proxy.sock');
  await lxcOk(t, d!.socket, 'config', 'device', 'add', 'x1bundle', 'x1p', 'proxy', `listen=unix:${listen}`, 'connect=tcp:127.0.0.1:9');
  await waitFor(() => existsSync(listen), 15_000, 'the proxy listener');
  t.true(childrenOf(d!.child.pid!).some((c) => c.includes(path.join('dist', 'plugins', 'proxy-devices', 'forwarder.js'))), 'the forwarder runs from the compiled tree');
  await lxcOk(t, d!.socket, 'config', 'device', 'remove', 'x1bundle', 'x1p');

  await lxcOk(t, d!.socket, 'stop', '--force', 'x1bundle');
  await lxcOk(t, d!.socket, 'delete', 'x1bundle');
  t.is(JSON.parse(await lxcOk(t, d!.socket, 'list', '--format', 'json')).length, 0);
});

test.serial('the bundle writes V8\'s code cache once a start without one serves, keeps it while V8 takes it, and replaces a damaged one', async (t) => {
  const other = mkdtempSync(path.join(tmpdir(), 'corral-x1-bundle-cache-'));
  // A cache of its own, so that the one beside the bundle, which other tests' daemons use, is left alone.
  const cache = path.join(other, 'code-cache');
  const data = path.join(other, 'data');
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  /** A start that serves GET /1.0, held open for `ms`. */
  const serveFor = async (ms: number) => {
    const { daemon } = await startBundle(data, [], { CORRAL_CODE_CACHE: cache });
    try {
      t.is((await daemon.request('GET', '/1.0')).status, 200);
      const until = Date.now() + ms;
      while (Date.now() < until) await sleep(200);
    } finally {
      await daemon.stop();
    }
  };
  try {
    await serveFor(500);
    t.true(existsSync(cache), 'a start without a cache wrote one');
    const written = readFileSync(cache);
    t.true(written.length > 100_000, `the cache holds the compiled bundle (${written.length} bytes)`);

    await serveFor(500);
    t.true(readFileSync(cache).equals(written), 'a start that V8 took the cache for leaves it as it was');

    writeFileSync(cache, Buffer.alloc(4096, 7));
    await serveFor(500);
    const replaced = readFileSync(cache);
    t.true(replaced.length > 100_000, 'a damaged cache was refused, the daemon served anyway, and the cache was written again');
  } finally {
    rmSync(other, { recursive: true, force: true });
  }
});

/** A daemon from `entry` loads its modules with V8's optimizer off and has it on again once it serves (kernel/boot-optimizer.ts). */
async function optimizerPausedWhileBooting(t: ExecutionContext, entry: string[]): Promise<void> {
  const other = mkdtempSync(path.join(tmpdir(), 'corral-x1-bundle-opt-'));
  // V8 reports each function it optimizes on stdout, between the daemon's JSON log lines.
  const { daemon } = await startBundle(other, ['--log-level', 'debug', ...entry.slice(1)], { CORRAL_CODE_CACHE: 'none' }, { entry: entry[0], nodeArgs: ['--trace-opt'] });
  const out = () => daemon.output();
  const optimized = (text: string) => text.split('\n').filter((line) => line.startsWith('[compiling method')).length;
  const BOOTING = 'plugins registered, booting them';
  try {
    await waitFor(() => out().includes('corral is ready'), 10_000, 'the ready line');
    t.true(out().includes(BOOTING));
    t.is(optimized(out().slice(0, out().indexOf(BOOTING))), 0, 'nothing was optimized while the modules loaded and the plugins registered');
    const afterBoot = out().length;
    for (let i = 0; i < 400 && optimized(out().slice(afterBoot)) === 0; i++) t.is((await daemon.request('GET', '/1.0/instances?recursion=1')).status, 200);
    t.true(optimized(out().slice(afterBoot)) > 0, 'functions made hot by requests are optimized');
  } finally {
    await daemon.stop();
    rmSync(other, { recursive: true, force: true });
  }
}

test.serial('the bundle loads without V8\'s optimizing compiler and has it back once it serves', optimizerPausedWhileBooting, [BUNDLE]);
test.serial('the compiled tree loads without V8\'s optimizing compiler too', optimizerPausedWhileBooting, [corrald, '--plugins', 'edge']);

/** kernel/boot-garbage.ts: one collection after the boot, once the loop is idle, never while clients keep it busy. */
test.serial('a daemon collects what its boot left once its loop goes idle, after the requests keeping it busy, and only once', async (t) => {
  const other = mkdtempSync(path.join(tmpdir(), 'corral-x1-bundle-gc-'));
  const { daemon } = await startBundle(other, ['--log-level', 'debug']);
  const collections = () => daemon.output().split('\n').filter((line) => line.includes('"collected the boot\'s garbage"')).map((line) => JSON.parse(line) as { time: string; heap_before_mib: number; heap_after_mib: number; ms: number });
  try {
    // Back-to-back requests from the moment it serves: its loop is never idle for a whole window meanwhile.
    const busyUntil = Date.now() + 1500;
    let answered = 0;
    while (Date.now() < busyUntil) {
      t.is((await daemon.request('GET', '/1.0/instances?recursion=1')).status, 200);
      answered++;
    }
    const loadEnded = Date.now();
    await waitFor(() => collections().length > 0, 10_000, 'the collection once the load stopped');
    const [collection] = collections();
    t.true(Date.parse(collection!.time) >= loadEnded - 5, `collected at ${collection!.time}, while ${answered} requests kept the loop busy until ${new Date(loadEnded).toISOString()}`);
    t.true(collection!.heap_after_mib < collection!.heap_before_mib, `V8's heap in use went from ${collection!.heap_before_mib} to ${collection!.heap_after_mib} MiB`);
    // Idle again later: no second one.
    t.is((await daemon.request('GET', '/1.0')).status, 200);
    await new Promise((resolve) => setTimeout(resolve, 800));
    t.is(collections().length, 1);
  } finally {
    await daemon.stop();
    rmSync(other, { recursive: true, force: true });
  }
});

test.serial('the edge bundle refuses a plugin it does not carry, before serving', async (t) => {
  const other = mkdtempSync(path.join(tmpdir(), 'corral-x1-bundle-full-'));
  try {
    const child = spawn(process.execPath, [...edgeNodeFlags, BUNDLE, '--dir', other, '--plugins', 'full'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c) => (output += c));
    child.stderr.on('data', (c) => (output += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    clearTimeout(timer);
    t.is(code, 2, output);
    t.regex(output, /this daemon is a bundle of the plugins .*run dist\/bin\/corrald\.js for other plugins/);
    t.false(existsSync(path.join(other, 'unix.socket')));
  } finally {
    rmSync(other, { recursive: true, force: true });
  }
});

serial('scripts/edge-install.sh lays out an install that serves with only sqlite3 beside the bundle', async (t) => {
  const target = mkdtempSync(path.join(tmpdir(), 'corral-x1-edge-install-'));
  const data = mkdtempSync(path.join(tmpdir(), 'corral-x1-edge-data-'));
  let daemon: Daemon | undefined;
  try {
    const laid = spawnSync('sh', [path.join(projectRoot, 'scripts', 'edge-install.sh'), target], { encoding: 'utf8', timeout: 60_000 });
    t.is(laid.status, 0, laid.stderr);
    // What `npm ci --omit=dev` would bring that the bundle loads at start: sqlite3's addon and its lookup (bindings).
    for (const pkg of ['bindings', 'file-uri-to-path']) cpSync(path.join(projectRoot, 'node_modules', pkg), path.join(target, 'node_modules', pkg), { recursive: true, dereference: true });
    for (const part of ['package.json', 'lib', path.join('build', 'Release', 'node_sqlite3.node')]) {
      cpSync(path.join(projectRoot, 'node_modules', 'sqlite3', part), path.join(target, 'node_modules', 'sqlite3', part), { recursive: true, dereference: true });
    }
    const child = spawn(process.execPath, [...edgeNodeFlags, path.join(target, 'dist', 'bundle', 'corrald-edge.cjs'), '--dir', data, '--init', 'auto'], {
      cwd: target, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...mallocEnv, CORRAL_INIT_NETWORK: 'none' },
    });
    ({ daemon } = await superviseDaemon(child, { dir: data, socket: path.join(data, 'unix.socket'), where: ' (edge install)', stopBoundMs: 60_000, samePid: true }));
    await waitFor(async () => (await daemon!.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 15_000, 'the init pool');
    t.regex(await lxcOk(t, daemon.socket, 'info'), /driver: lxc/);
    t.deepEqual(JSON.parse(await lxcOk(t, daemon.socket, 'storage', 'list', '--format', 'json')).map((p: { driver: string }) => p.driver), ['dir']);
    t.true(existsSync(path.join(target, 'dist', 'plugins', 'instance-lxc', 'seccomp-proxy', 'corral-seccomp-proxy')));
  } finally {
    await daemon?.stop();
    killContainers(data);
    rmSync(data, { recursive: true, force: true });
    rmSync(target, { recursive: true, force: true });
  }
});
