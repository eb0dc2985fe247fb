/**
 * The instances family's hook set and extension point, seen from a plugin beside the family
 * (test/fixtures/instance-follower) while the real `lxc` client drives a container through its
 * life: every change reaches the follower in order, with what it needs; a tap inside a change can
 * refuse it and the change is undone; registration is open while plugins register, and closed after.
 */
import test from 'ava';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { killContainers, projectRoot, startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { hasLxc, lxc, lxcOk } from '../helpers/clients.js';

let d: Daemon;
let image: BusyboxImage;
let work: string;

const serial = hasLxc() ? test.serial : test.serial.skip;
if (!hasLxc()) console.log('instance-hooks: skipped, the lxc client (lxd-client) is not installed');

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);

/** What the follower saw, from the `from`th record on. */
async function seen(from = 0): Promise<Record<string, unknown>[]> {
  return ((await d.request('GET', '/1.0/instance-follower')).json.metadata as Record<string, unknown>[]).slice(from);
}

test.before(async () => {
  if (!hasLxc()) return;
  image = buildBusyboxImage();
  work = mkdtempSync(path.join(tmpdir(), 'corral-e2e-hooks-'));
  // The edge set and the follower, from a registry file beside the installed one.
  const registry = JSON.parse(readFileSync(path.join(projectRoot, 'plugin-registry.json'), 'utf8'));
  registry.plugins.push({
    id: 'instance-follower', entry: 'test/fixtures/instance-follower/index.ts', version: '1.0.0', sdk: '^2.0.0',
    requires: { instances: '^0.1.0' },
  });
  const file = path.join(work, 'registry.json');
  writeFileSync(file, JSON.stringify(registry));
  d = await startDaemon({ plugins: [...registry.sets.edge, 'instance-follower'].join(','), args: ['--registry', file, '--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/profiles/default')).json?.metadata?.devices?.root !== undefined, 10000, 'the init root disk');
  await importImage(d, image.unified, 'bb');
});

test.after.always(async () => {
  if (d) killContainers(d.dir);
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
  if (work) rmSync(work, { recursive: true, force: true });
});

serial('a container from init to delete: each change reaches the follower, in order', async (t) => {
  await run(t, 'init', 'bb', 'c1');
  // The device type the follower registered through the extension point is one the family knows.
  await run(t, 'config', 'device', 'add', 'c1', 'mark', 'follower');
  await run(t, 'rename', 'c1', 'c2');
  await run(t, 'start', 'c2');
  await run(t, 'snapshot', 'c2', 's1');
  await run(t, 'stop', 'c2', '--force');
  await run(t, 'restore', 'c2', 's1');
  await run(t, 'config', 'set', 'c2', 'user.follow=yes');
  await run(t, 'delete', 'c2');
  const rootAndNic = (devices: unknown) => (devices as string[]).filter((n) => n !== 'eth0');
  const steps = (await seen()).map((s) => ('devices' in s ? { ...s, devices: rootAndNic(s.devices) } : s));
  t.deepEqual(steps, [
    { hook: 'creating', instance: 'default/c1', origin: 'create', devices: ['root'] },
    { hook: 'devicesChanging', instance: 'default/c1', new: true },
    { hook: 'created', instance: 'default/c1' },
    { hook: 'updating', instance: 'default/c1', user: null },
    { hook: 'devicesChanging', instance: 'default/c1', new: false },
    { hook: 'updated', instance: 'default/c1' },
    { hook: 'renaming', from: 'default/c1', to: 'default/c2', cause: 'rename' },
    { hook: 'renamed', from: 'default/c1', to: 'default/c2', cause: 'rename' },
    { hook: 'starting', instance: 'default/c2', devices: ['mark', 'root'] },
    { hook: 'launching', instance: 'default/c2', devices: ['mark', 'root'] },
    { hook: 'started', instance: 'default/c2' },
    { hook: 'stopped', instance: 'default/c2' },
    { hook: 'restoring', instance: 'default/c2', snapshot: 's1' },
    { hook: 'updating', instance: 'default/c2', user: 'yes' },
    { hook: 'devicesChanging', instance: 'default/c2', new: false },
    { hook: 'updated', instance: 'default/c2' },
    { hook: 'removed', instance: 'default/c2' },
  ]);
});

serial('a copy is created with its origin; a tap that refuses an edit leaves the instance as it was', async (t) => {
  await run(t, 'init', 'bb', 'c3');
  await run(t, 'copy', 'c3', 'c4');
  const before = await run(t, 'config', 'show', 'c4');
  const from = (await seen()).length;
  const refused = await lxc(d.socket, 'config', 'device', 'add', 'c4', 'refused', 'follower');
  t.not(refused.status, 0);
  t.regex(refused.stderr, /The follower refuses a device named "refused"/);
  t.deepEqual(parse(await run(t, 'config', 'show', 'c4')), parse(before), 'the record is unchanged');
  t.deepEqual((await seen(from)).map((s) => s.hook), ['updating', 'devicesChanging'], `nothing past the refusal: ${JSON.stringify(await seen())}`);
  const created = (await seen()).find((s) => s.hook === 'creating' && s.instance === 'default/c4');
  t.is(created?.origin, 'copy');
  await run(t, 'delete', 'c3', 'c4');
});

serial('registration is closed once plugins have registered: a late device type is refused', async (t) => {
  const late = await d.request('POST', '/1.0/instance-follower/late');
  t.is(late.status, 200);
  t.false(late.json.metadata.registered);
  t.regex(late.json.metadata.error, /extension point "instances\.registration" is only open while plugins register/);
  await run(t, 'init', 'bb', 'c5');
  const refused = await lxc(d.socket, 'config', 'device', 'add', 'c5', 'x', 'latecomer');
  t.not(refused.status, 0, 'the late type is not known');
  t.regex(refused.stderr, /latecomer/);
  await run(t, 'delete', 'c5');
});
