/**
 * A project that uses the images, profiles and custom volumes of `default` (features.*=false): the
 * `lxc` client watches the events of the project it names for its operations to end, so those
 * operations must belong to that project, not to `default` where their resources live. Compared
 * with the reference (LXD 5.0.2): every operation of these flows is on the named project's event
 * stream and none on default's; the images family files its lifecycle events under the named
 * project (source URLs with `?project=`), the volumes family under `default`.
 */
import test from 'ava';
import { rmSync } from 'node:fs';
import type WebSocket from 'ws';
import { collect, killContainers, startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { hasLxc, lxc } from '../helpers/clients.js';

const PLUGINS = 'warnings,storage,storage-dir,images,profiles,instances,instance-lxc,projects';
const P = 'shared';
/** lxc waits without bound for an operation whose end it never hears of: well above what these steps take. */
const STEP_BOUND_MS = 20_000;

let d: Daemon;
let image: BusyboxImage;
let streams: { named: any[]; def: any[] };
const sockets: WebSocket[] = [];

test.before(async () => {
  if (!hasLxc()) return;
  image = buildBusyboxImage('gzip');
  d = await startDaemon({ plugins: PLUGINS, args: ['--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/profiles/default')).json?.metadata?.devices?.root !== undefined, 10000, 'the init root disk');
  const created = await d.request('POST', '/1.0/projects', {
    name: P, config: { 'features.images': 'false', 'features.profiles': 'false', 'features.storage.volumes': 'false' },
  });
  if (created.status !== 200) throw new Error(created.body);
  const named = await d.websocket(`/1.0/events?project=${P}&type=operation,lifecycle`);
  const def = await d.websocket('/1.0/events?project=default&type=operation,lifecycle');
  sockets.push(named, def);
  streams = { named: collect(named), def: collect(def) };
});

test.after.always(async () => {
  if (d) killContainers(d.dir);
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
});

/** Runs `lxc --project P ...`, which must succeed well within the bound (it hung before until killed). */
async function step(t: any, ...args: string[]): Promise<string> {
  const started = Date.now();
  const res = await lxc(d.socket, '--project', P, ...args);
  const took = Date.now() - started;
  t.is(res.status, 0, `lxc ${args.join(' ')}: ${res.stderr}`);
  t.true(took < STEP_BOUND_MS, `lxc ${args.join(' ')} took ${took} ms`);
  return res.stdout;
}

const opIds = (events: any[]) => new Set(events.filter((e) => e.type === 'operation').map((e) => e.metadata.id));
const lifecycles = (events: any[], prefix: string) => events.filter((e) => e.type === 'lifecycle' && e.metadata.action.startsWith(prefix));

test.serial('image import, publish and delete in a project using default\'s images return, their events on the named project', async (t) => {
  if (!hasLxc()) return t.pass('lxc (lxd-client) is not installed');
  await step(t, 'image', 'import', image.unified, '--alias', 'bb');
  await step(t, 'init', 'bb', 'c1');
  t.regex(await step(t, 'publish', 'c1', '--alias', 'pub'), /Instance published with fingerprint/);
  await step(t, 'delete', 'c1');
  await step(t, 'image', 'delete', 'pub');
  await step(t, 'image', 'delete', 'bb');
  t.is((await d.request('GET', '/1.0/images')).json.metadata.length, 0, 'the images, which live in default, are gone');

  await waitFor(() => lifecycles(streams.named, 'image-deleted').length === 2, 5000, 'the image-deleted events');
  const ops = streams.named.filter((e) => e.type === 'operation');
  const descriptions = new Set(ops.map((e) => e.metadata.description));
  for (const expected of ['Downloading image', 'Deleting image']) t.true(descriptions.has(expected), `${expected} on the named project's stream`);
  for (const op of ops) t.is(op.project, P);
  // The delete's last event says it ended: what lxc waited for.
  t.true(ops.some((e) => e.metadata.description === 'Deleting image' && e.metadata.status === 'Success'));
  for (const id of opIds(streams.named)) t.false(opIds(streams.def).has(id), 'no operation of the project is on default\'s stream');

  const images = lifecycles(streams.named, 'image');
  t.deepEqual(images.map((e) => e.metadata.action), [
    'image-created', 'image-alias-created', 'image-created', 'image-alias-created', 'image-deleted', 'image-deleted',
  ]);
  for (const e of images) t.regex(e.metadata.source, new RegExp(`\\?project=${P}$`), `${e.metadata.action} names the project`);
  t.deepEqual(lifecycles(streams.def, 'image'), [], 'nothing about these images on default\'s stream');
});

test.serial('custom volume snapshot, copy, export and import in a project using default\'s volumes return', async (t) => {
  if (!hasLxc()) return t.pass('lxc (lxd-client) is not installed');
  const before = opIds(streams.named).size;
  await step(t, 'storage', 'volume', 'create', 'default', 'v1');
  await step(t, 'storage', 'volume', 'snapshot', 'default', 'v1');
  await step(t, 'storage', 'volume', 'copy', 'default/v1', 'default/v2');
  const out = `${image.dir}/v1.tar.gz`;
  t.regex(await step(t, 'storage', 'volume', 'export', 'default', 'v1', out), /Backup exported successfully/);
  await step(t, 'storage', 'volume', 'import', 'default', out, 'v3');
  await step(t, 'storage', 'volume', 'delete', 'default', 'v3');
  await step(t, 'storage', 'volume', 'delete', 'default', 'v2');
  await step(t, 'storage', 'volume', 'delete', 'default', 'v1');
  t.deepEqual((await d.request('GET', '/1.0/storage-pools/default/volumes/custom')).json.metadata, [], 'the volumes lived in default');

  await waitFor(() => lifecycles(streams.def, 'storage-volume-deleted').length === 3, 5000, 'the volume-deleted events');
  const descriptions = new Set(streams.named.filter((e) => e.type === 'operation').map((e) => e.metadata.description));
  t.true(opIds(streams.named).size - before >= 5, 'snapshot, copy, backup, its deletion and the import ran as operations of the project');
  for (const wanted of [/snapshot/i, /cop/i, /back/i, /restor/i]) t.true([...descriptions].some((s) => wanted.test(s)), `${wanted} on the named project's stream`);
  for (const id of opIds(streams.named)) t.false(opIds(streams.def).has(id));
  // As with the reference, the volumes family files its lifecycle events where the volume lives.
  t.true(lifecycles(streams.def, 'storage-volume-created').length >= 2);
  t.deepEqual(lifecycles(streams.named, 'storage-volume'), []);
});
