/**
 * The full set as one bundled file (scripts/build-bundle.mjs full, part of `npm run build`), which is
 * what `npm start` runs: one file parses and links far faster than the tree's hundreds of modules, and a
 * daemon restarting with many containers running waits on that. It must be the same daemon as
 * dist/bin/corrald.js with --plugins full: the same extensions and routes, a busybox container's life
 * through `lxc` (exec included: its preload is found where the compiled tree keeps it), and the web UI's
 * files, which are read from beside the compiled plugin.
 */
import test from 'ava';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot, startDaemon, startWithPool, type Daemon } from '../helpers/daemon.js';
import { lxcOk } from '../helpers/clients.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { withLxcClient } from '../helpers/needs.js';
import { checkOneFile, endBundleDaemon } from '../helpers/bundle-checks.js';

const BUNDLE = path.join(projectRoot, 'dist', 'bundle', 'corrald-full.cjs');
const serial = withLxcClient();

let d: Daemon | undefined;
let dir: string;
let image: BusyboxImage | undefined;

test.before(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'corral-x4-full-bundle-'));
});

test.after.always(() => endBundleDaemon(d, dir, image?.dir));

test.serial('npm run build writes the full bundle as one file, and npm start runs it', (t) => {
  checkOneFile(t, BUNDLE);
  const scripts = JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')).scripts as Record<string, string>;
  t.regex(scripts.start!, /dist\/bundle\/corrald-full\.cjs/);
});

serial('the full bundle serves the extensions and routes of the tree with --plugins full, and the web UI', async (t) => {
  d = await startWithPool({ dir, entry: BUNDLE, plugins: 'full' });
  const tree = await startDaemon({ plugins: 'full' });
  try {
    const [fromTree, fromBundle] = await Promise.all([tree.request('GET', '/1.0'), d.request('GET', '/1.0')]);
    t.true(fromBundle.json.metadata.api_extensions.length > 100);
    t.deepEqual(fromBundle.json.metadata.api_extensions, fromTree.json.metadata.api_extensions);
    const [treeApi, bundleApi] = await Promise.all([tree.request('GET', '/openapi.json'), d.request('GET', '/openapi.json')]);
    t.deepEqual(Object.keys(bundleApi.json.paths).sort(), Object.keys(treeApi.json.paths).sort());
    // The UI's library modules are found through module resolution, which the bundle's loader lends it.
    const [treeModule, bundleModule] = await Promise.all([tree.request('GET', '/ui/vendor/preact.mjs'), d.request('GET', '/ui/vendor/preact.mjs')]);
    t.is(bundleModule.status, 200);
    t.regex(String(bundleModule.body), /\bexport\b/, 'the ES module build, as published');
    t.is(String(bundleModule.body), String(treeModule.body));
  } finally {
    await tree.stop();
  }
  const page = await d.request('GET', '/ui/');
  t.is(page.status, 200);
  t.regex(String(page.body), /<html/i);
});

serial('a busybox container created, started, run, stopped and deleted through the full bundle', async (t) => {
  t.truthy(d, 'the daemon of the test before');
  image = buildBusyboxImage('gzip');
  await lxcOk(t, d!.socket, 'image', 'import', image.unified, '--alias', 'bb');
  await lxcOk(t, d!.socket, 'launch', 'bb', 'x4full', '-c', 'security.syscalls.intercept.mknod=true');
  t.is((await lxcOk(t, d!.socket, 'exec', 'x4full', '--', 'echo', 'from-the-bundle')).trim(), 'from-the-bundle');
  // An intercepted call: the seccomp proxy, a helper beside the compiled plugin, answers it.
  await lxcOk(t, d!.socket, 'exec', 'x4full', '--', 'mknod', '/tmp/x4n', 'c', '1', '3');
  t.regex(await lxcOk(t, d!.socket, 'exec', 'x4full', '--', 'ls', '-ln', '/tmp/x4n'), /^crw/);
  await lxcOk(t, d!.socket, 'stop', '--force', 'x4full');
  await lxcOk(t, d!.socket, 'delete', 'x4full');
  t.is(JSON.parse(await lxcOk(t, d!.socket, 'list', '--format', 'json')).length, 0);
});
