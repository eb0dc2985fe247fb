/**
 * The images plugin's schedule, through the real `lxc` and two corral daemons over HTTPS: images
 * with auto_update follow their source's alias (images.auto_update_interval, a project's key over
 * the server's), and cached images unused for images.remote_cache_expiry days go. The target runs
 * with CORRAL_IMAGES_HOUR_MS, which shortens the schedule's hour (and day) so that hours pass in
 * a test; everything else is the real path.
 */
import test from 'ava';
import { createHash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { hasLxc, lxc } from '../helpers/clients.js';
import { startWithPool, waitFor, type Daemon } from '../helpers/daemon.js';
import { RemoteClient, type Listening } from '../helpers/remotes.js';
import { startWithImage, stopImageDaemons, type ImageDaemon } from '../helpers/image-daemon.js';
import { referenceUnavailable, startReference } from '../helpers/reference-daemon.js';

const skip = !hasLxc() ? 'the lxc client is not installed' : undefined;
const noReference = skip ?? referenceUnavailable();
const PASSWORD = 'auto-update-pass-51c2';
const client = new RemoteClient(PASSWORD);
const { lxc: remoteLxc, ok } = client;
/** The target's hour: a day is 24 of them (12 s). */
const HOUR_MS = 500;

let source: ImageDaemon;
let target: Daemon;
const made: BusyboxImage[] = [];

/** HTTPS on its own loopback address, and the daemon added to the client home as remote `name`. */
async function expose(name: string, daemon: Listening, ip: string): Promise<void> {
  await client.add(name, daemon, ip);
}

/** A new image on the source, public, its fingerprint. */
async function publicImage(t: any, compression: 'xz' | 'zstd'): Promise<string> {
  const image = buildBusyboxImage(compression);
  made.push(image);
  const imported = await lxc(source.socket, 'image', 'import', image.unified, '--public');
  t.is(imported.status, 0, imported.stderr);
  return createHash('sha256').update(readFileSync(image.unified)).digest('hex');
}

const imagesOf = async (project: string): Promise<any[]> => JSON.parse(await remoteLxc('query', `b:/1.0/images?recursion=1&project=${project}`).then((r) => r.stdout));
const aliasTarget = async (project: string, alias: string): Promise<string | undefined> => {
  const res = await target.request('GET', `/1.0/images/aliases/${alias}?project=${project}`);
  return res.json?.metadata?.target;
};

test.before(async () => {
  if (skip) return;
  source = await startWithImage({ plugins: 'full' });
  target = await startWithPool({ plugins: 'full', env: { CORRAL_IMAGES_HOUR_MS: String(HOUR_MS) } });
  await expose('a', source, '127.0.44.1');
  await expose('b', target, '127.0.44.2');
});

test.after.always(async () => {
  await stopImageDaemons();
  for (const image of made) rmSync(image.dir, { recursive: true, force: true });
  client.remove();
});

test.serial('images.auto_update_interval: an image copied with --auto-update follows its alias on the source (the old one goes, its instance stays); a project with its own interval of 0 keeps its copy until it sets one (projects_images_auto_update)', async (t) => {
  if (skip) return t.pass(skip);
  const first = await publicImage(t, 'xz');
  await ok(t, 'image', 'alias', 'create', 'a:rolling', first);
  await ok(t, 'project', 'create', 'b:frozen', '-c', 'images.auto_update_interval=0');
  await ok(t, 'config', 'set', 'b:', 'images.auto_update_interval', '1');
  t.is((await ok(t, 'config', 'get', 'b:', 'images.auto_update_interval')).trim(), '1');
  for (const project of ['default', 'frozen']) await ok(t, 'image', 'copy', 'a:rolling', 'b:', '--copy-aliases', '--auto-update', '--target-project', project);
  // The copy in default is used once, so that its last use can be seen carried over.
  // c0 stays: the reference removes the old image all the same (an instance no longer needs its image).
  await ok(t, 'init', 'b:rolling', 'b:c0');
  const copied = (await imagesOf('default')).find((i) => i.fingerprint === first);
  t.truthy(copied);
  t.is(copied.auto_update, true);
  t.is(copied.update_source?.alias, 'rolling');
  t.not(copied.last_used_at, '0001-01-01T00:00:00Z');

  // A newer image takes the alias on the source: the target follows within a few of its hours.
  const second = await publicImage(t, 'zstd');
  await ok(t, 'image', 'alias', 'delete', 'a:rolling');
  await ok(t, 'image', 'alias', 'create', 'a:rolling', second);
  await waitFor(async () => (await imagesOf('default')).map((i) => i.fingerprint).join() === second, 30_000, 'the auto-update to replace the image');
  t.is(await aliasTarget('default', 'rolling'), second);
  const after = await imagesOf('default');
  t.false(after.some((i) => i.fingerprint === first), 'the old image is gone');
  const fresh = after.find((i) => i.fingerprint === second);
  t.is(fresh.auto_update, true);
  t.is(fresh.public, false);
  t.is(fresh.cached, false);
  t.deepEqual(fresh.aliases.map((a: any) => a.name), ['rolling']);
  t.is(fresh.update_source?.alias, 'rolling');
  t.is(fresh.last_used_at, copied.last_used_at, 'the last use is carried over, as the reference does');
  await ok(t, 'start', 'b:c0');
  t.is((await ok(t, 'list', 'b:c0', '--format', 'csv', '-c', 'ns')).trim(), 'c0,RUNNING');
  await ok(t, 'delete', '--force', 'b:c0');

  // The project with an interval of 0 kept its image through those hours, and follows once it sets 1.
  await new Promise((resolve) => setTimeout(resolve, 4 * HOUR_MS));
  t.is(await aliasTarget('frozen', 'rolling'), first);
  await ok(t, 'project', 'set', 'b:frozen', 'images.auto_update_interval', '1');
  // The alias moves first, then the old image goes.
  await waitFor(async () => (await imagesOf('frozen')).map((i) => i.fingerprint).join() === second, 30_000, 'the frozen project to follow');
  t.is(await aliasTarget('frozen', 'rolling'), second);
  // The updates ran as task operations the reference names so.
  const ops = JSON.parse(await ok(t, 'query', 'b:/1.0/operations?recursion=1')) as Record<string, any[]>;
  t.true(Object.values(ops).flat().some((o) => o.description === 'Updating images'), JSON.stringify(ops));
  // Auto-update off: nothing more is asked of the source.
  await ok(t, 'config', 'set', 'b:', 'images.auto_update_interval', '0');
  await ok(t, 'project', 'unset', 'b:frozen', 'images.auto_update_interval');
});

test.serial('images.remote_cache_expiry: a cached image unused for longer than its project\'s expiry goes, the instance made from it stays; other projects keep theirs (projects_images_remote_cache_expiry)', async (t) => {
  if (skip) return t.pass(skip);
  const fp = (await target.request('GET', '/1.0/images/aliases/rolling')).json.metadata.target as string;
  for (const project of ['shortlived', 'longlived']) {
    await ok(t, 'project', 'create', `b:${project}`, ...(project === 'shortlived' ? ['-c', 'images.remote_cache_expiry=1'] : []));
    await ok(t, 'profile', 'device', 'add', 'b:default', 'root', 'disk', 'path=/', 'pool=default', '--project', project);
    // --project would name the source's project too: the remote's current project names the target's.
    await ok(t, 'project', 'switch', `b:${project}`);
    await ok(t, 'init', 'a:rolling', 'b:c1');
    await ok(t, 'project', 'switch', 'b:default');
    const cached = (await imagesOf(project)).find((i) => i.fingerprint === fp);
    t.is(cached?.cached, true, project);
    t.not(cached?.last_used_at, '0001-01-01T00:00:00Z', `${project}: the instance creation used it`);
  }
  // The server's key is unset: its default, 10 days, holds for the projects without their own.
  t.is((await ok(t, 'config', 'get', 'b:', 'images.remote_cache_expiry')).trim(), '');
  // One day of the target's clock is 24 of its hours; the pruning runs once a day.
  await waitFor(async () => (await imagesOf('shortlived')).length === 0, 60_000, 'the expired cached image to go');
  t.is((await imagesOf('longlived')).length, 1, 'the server-wide expiry (10 days) has not passed');
  t.is((await imagesOf('default')).length, 1, 'an image copied on purpose is never pruned');
  await ok(t, 'start', 'b:c1', '--project', 'shortlived');
  t.is((await ok(t, 'list', 'b:', '--project', 'shortlived', '--format', 'csv', '-c', 'ns')).trim(), 'c1,RUNNING');
  const ops = JSON.parse(await ok(t, 'query', 'b:/1.0/operations?recursion=1')) as Record<string, any[]>;
  t.true(Object.values(ops).flat().some((o) => o.description === 'Cleaning up expired images'), JSON.stringify(ops));
  for (const project of ['shortlived', 'longlived']) await ok(t, 'delete', '--force', 'b:c1', '--project', project);
});

test.serial('the image keys refuse what is not an integer, on the server and on a project, as the reference does', async (t) => {
  if (skip) return t.pass(skip);
  for (const key of ['images.auto_update_interval', 'images.remote_cache_expiry']) {
    const server = await remoteLxc('config', 'set', 'b:', key, '0.5');
    t.not(server.status, 0, key);
    t.regex(server.stderr, /integer/i, key);
    const project = await remoteLxc('project', 'set', 'b:longlived', key, 'soon');
    t.not(project.status, 0, key);
    // Negative values are taken (they turn the task off), as the reference takes them.
    await ok(t, 'config', 'set', 'b:', `${key}=-1`);
    await ok(t, 'config', 'unset', 'b:', key);
  }
});

test.serial('an image copied from the reference with --auto-update follows the reference\'s alias (projects_images_auto_update)', async (t) => {
  if (noReference) return t.pass(noReference);
  const ref = await startReference();
  try {
    const built: BusyboxImage[] = [buildBusyboxImage('bzip2'), buildBusyboxImage('none')];
    made.push(...built);
    const fps = built.map((i) => createHash('sha256').update(readFileSync(i.unified)).digest('hex'));
    const first = await ref.lxc('image', 'import', built[0]!.unified, '--public', '--alias', 'himg2-rolling');
    t.is(first.status, 0, first.stderr);
    await expose('ref', ref, '127.0.44.9');
    await ok(t, 'project', 'create', 'b:fromref');
    await ok(t, 'image', 'copy', 'ref:himg2-rolling', 'b:', '--copy-aliases', '--auto-update', '--target-project', 'fromref');
    t.is((await imagesOf('fromref'))[0]?.update_source?.alias, 'himg2-rolling');
    await ok(t, 'config', 'set', 'b:', 'images.auto_update_interval', '1');
    const second = await ref.lxc('image', 'import', built[1]!.unified, '--public');
    t.is(second.status, 0, second.stderr);
    await ok(t, 'image', 'alias', 'delete', 'ref:himg2-rolling');
    await ok(t, 'image', 'alias', 'create', 'ref:himg2-rolling', fps[1]!);
    await waitFor(async () => (await imagesOf('fromref')).map((i) => i.fingerprint).join() === fps[1], 30_000, 'the copy to follow the reference');
    t.is(await aliasTarget('fromref', 'himg2-rolling'), fps[1]);
    await ok(t, 'config', 'set', 'b:', 'images.auto_update_interval', '0');
  } finally {
    await ref.stop();
  }
});

test.serial('a daemon stopping while an auto-update waits on a silent source stops at once: the pass is cancelled, not waited out', async (t) => {
  if (skip) return t.pass(skip);
  await ok(t, 'config', 'set', 'b:', 'images.auto_update_interval', '1');
  // The source still answers TCP (the kernel does) but says nothing: the target's update hangs on it.
  process.kill(source.child.pid!, 'SIGSTOP');
  try {
    await waitFor(async () => {
      const ops = (await target.request('GET', '/1.0/operations?recursion=1')).json.metadata as Record<string, any[]>;
      return (ops.running ?? []).some((o) => o.description === 'Updating images');
    }, 30_000, 'an update pass to start');
    const started = Date.now();
    await target.stop();
    // The connect bound alone is 15 s: well under it, the stop cancelled the pass.
    t.true(Date.now() - started < 10_000, `stopped in ${Date.now() - started} ms`);
  } finally {
    process.kill(source.child.pid!, 'SIGCONT');
  }
});
