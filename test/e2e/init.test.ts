/** `corrald --init`: a preseed (the reference's `init --preseed` format) applied once the daemon is up. */
import test from 'ava';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon, stopDaemons, waitFor, startWithPool } from '../helpers/daemon.js';
import { lxc } from '../helpers/clients.js';

const work = mkdtempSync(path.join(tmpdir(), 'corral-init-'));
test.after.always(async () => {
  await stopDaemons();
  rmSync(work, { recursive: true, force: true });
});

const PRESEED = `config:
  user.site: lab
storage_pools:
- name: data
  driver: dir
  config:
    source: ${path.join(work, 'pool')}
profiles:
- name: default
  devices:
    root: {type: disk, path: /, pool: data}
- name: web
  description: web servers
  config:
    limits.memory: 64MiB
`;

test.serial('a preseed creates pools and profiles and sets server config; applying it again changes nothing', async (t) => {
  const file = path.join(work, 'preseed.yaml');
  writeFileSync(file, PRESEED);
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-init-data-'));
  let d = await startDaemon({ plugins: 'edge', dir, args: ['--init', file] });
  await waitFor(async () => (await d.request('GET', '/1.0/profiles/web')).status === 200, 10000, 'the preseed');
  t.is((await d.request('GET', '/1.0')).json.metadata.config['user.site'], 'lab');
  const pool = (await d.request('GET', '/1.0/storage-pools/data')).json.metadata;
  t.is(pool.driver, 'dir');
  t.is(pool.config.source, path.join(work, 'pool'));
  t.deepEqual((await d.request('GET', '/1.0/profiles/default')).json.metadata.devices.root, { type: 'disk', path: '/', pool: 'data' });
  const profiles = await lxc(d.socket, 'profile', 'show', 'web');
  t.regex(profiles.stdout, /limits\.memory: 64MiB/);
  const etag = (await d.request('GET', '/1.0/profiles/web')).headers.etag;
  await d.stop();

  d = await startDaemon({ plugins: 'edge', dir, args: ['--init', file] });
  await new Promise((r) => setTimeout(r, 500));
  t.is((await d.request('GET', '/1.0/profiles/web')).headers.etag, etag, 'unchanged');
  t.is((await d.request('GET', '/1.0/storage-pools')).json.metadata.length, 1);
  await d.stop();
  rmSync(dir, { recursive: true, force: true });
});

test.serial('--init auto makes the default dir pool only when there is none; a bad preseed is reported', async (t) => {
  const d = await startWithPool();
  t.is((await d.request('GET', '/1.0/storage-pools/default')).json.metadata.driver, 'dir');
  t.is((await d.request('GET', '/1.0/profiles/default')).json.metadata.devices.root.pool, 'default');
  await d.stop();

  const bad = path.join(work, 'bad.yaml');
  writeFileSync(bad, 'storage_pools:\n- name: broken\n  driver: nosuchdriver\n');
  const b = await startDaemon({ plugins: 'edge', args: ['--init', bad] });
  await waitFor(() => b.output().includes('init failed'), 10000, 'the init error');
  t.regex(b.output(), /broken/);
  t.is((await b.request('GET', '/1.0/storage-pools/broken')).status, 404, 'nothing half-created');
  await b.stop();
});
