/**
 * `lxc image copy` with its flags (--copy-aliases, --alias, --auto-update, --public; lxc 5.0.2 has
 * no --profile, so the profiles of a copy are asked through the API) between two corrals and
 * between corral and the reference, both ways: the same command gives the same image record on
 * corral as on the reference (times aside).
 */
import test from 'ava';
import path from 'node:path';
import { hasLxc, lxc } from '../helpers/clients.js';
import { startWithPool, type Daemon } from '../helpers/daemon.js';
import { RemoteClient, type Listening } from '../helpers/remotes.js';
import { startWithImage, stopImageDaemons, type ImageDaemon } from '../helpers/image-daemon.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../helpers/reference-daemon.js';

const skip = !hasLxc() ? 'the lxc client is not installed' : undefined;
const noReference = skip ?? referenceUnavailable();
const PASSWORD = 'copy-flags-pass-7d21';
const client = new RemoteClient(PASSWORD);
const { lxc: remoteLxc, ok } = client;

let source: ImageDaemon;
let target: Daemon;
let ref: ReferenceDaemon | undefined;
let fp = '';
const urls: Record<string, string> = {};

/** HTTPS on its own loopback address, and the daemon added to the client home as remote `name`. */
async function expose(name: string, daemon: Listening, ip: string): Promise<void> {
  urls[name] = await client.add(name, daemon, ip);
}

/** An image record as lxc query shows it, without what depends on when it arrived or where from. */
async function record(t: any, remote: string, project = 'default'): Promise<any> {
  const shown = JSON.parse(await ok(t, 'query', `${remote}:/1.0/images/${fp}?project=${project}`));
  const { uploaded_at: _u, last_used_at: _l, update_source: from, ...rest } = shown;
  rest.aliases = [...rest.aliases].sort((a: any, b: any) => a.name.localeCompare(b.name));
  return { ...rest, update_source: from ? { ...from, server: '<server>', certificate: '<certificate>' } : undefined };
}

test.before(async () => {
  if (skip) return;
  // Imported by lxc, the source image has a filename: a copy keeps it unless the request edits the record.
  source = await startWithImage({ plugins: 'full', importWith: 'lxc' });
  target = await startWithPool({ plugins: 'full' });
  await expose('a', source, '127.0.44.5');
  await expose('b', target, '127.0.44.6');
  fp = JSON.parse(await remoteLxc('query', 'a:/1.0/images/aliases/bb').then((r) => r.stdout)).target;
  const second = await lxc(source.socket, 'image', 'alias', 'create', 'bb-second', fp);
  if (second.status !== 0) throw new Error(second.stderr);
  for (const project of ['fromref', 'public']) {
    const made = await remoteLxc('project', 'create', `b:${project}`, '-c', 'features.profiles=false');
    if (made.status !== 0) throw new Error(made.stderr);
  }
  const profile = await remoteLxc('profile', 'create', 'b:himg2-extra');
  if (profile.status !== 0) throw new Error(profile.stderr);
});

test.after.always(async () => {
  await ref?.stop();
  await stopImageDaemons();
  client.remove();
});

const FLAGS = ['--copy-aliases', '--alias', 'himg2-more', '--auto-update', '--public'];

test.serial('lxc image copy --copy-aliases --alias --auto-update --public of a private image between two corrals', async (t) => {
  if (skip) return t.pass(skip);
  await ok(t, 'image', 'copy', 'a:bb', 'b:', ...FLAGS);
  const copied = await record(t, 'b');
  t.deepEqual(copied.aliases.map((a: any) => a.name), ['bb', 'bb-second', 'himg2-more']);
  t.is(copied.public, true);
  t.is(copied.auto_update, true);
  t.deepEqual(copied.profiles, ['default']);
  t.is(copied.cached, false);
  // Fetched with a secret (the source image is private): nothing to update from.
  t.is(copied.update_source, undefined);
  // A public image copied by alias keeps where it came from.
  await ok(t, 'query', '-X', 'PATCH', 'a:/1.0/images/' + fp, '-d', '{"public": true}');
  await ok(t, 'image', 'copy', 'a:bb', 'b:', '--target-project', 'public', '--auto-update');
  const pub = await record(t, 'b', 'public');
  t.deepEqual(pub.update_source, { alias: 'bb', certificate: '<certificate>', protocol: 'lxd', server: '<server>', image_type: '' });
  await ok(t, 'query', '-X', 'PATCH', 'a:/1.0/images/' + fp, '-d', '{"public": false}');
});

test.serial('the same lxc image copy into the reference gives the same record; and from the reference into corral', async (t) => {
  if (noReference) return t.pass(noReference);
  ref = await startReference();
  await expose('ref', ref, '127.0.44.7');
  await ok(t, 'profile', 'create', 'ref:himg2-extra');
  await ok(t, 'image', 'copy', 'a:bb', 'ref:', ...FLAGS);
  const theirs = await record(t, 'ref');
  const ours = await record(t, 'b');
  t.deepEqual(ours, theirs);
  // The reference as the source (its copy is public, so no secret is asked and the source is kept;
  // its aliases already hold the extra one).
  await ok(t, 'image', 'copy', 'ref:bb', 'b:', '--target-project', 'fromref', '--copy-aliases', '--auto-update', '--public');
  const { update_source: from, ...copied } = await record(t, 'b', 'fromref');
  const { update_source: _none, ...expected } = theirs;
  t.deepEqual(copied, expected);
  t.is(from?.alias, 'bb');
});

test.serial('a copy asked with profiles: corral keeps them in name order and refuses an unknown one before fetching, where the reference drops them (image_profiles, decision 0044)', async (t) => {
  if (noReference) return t.pass(noReference);
  await ok(t, 'query', '-X', 'PATCH', 'a:/1.0/images/' + fp, '-d', '{"public": true}');
  const certificate = JSON.parse(await ok(t, 'query', 'a:/1.0')).environment.certificate as string;
  const body = (project: string, profiles: string[]) => JSON.stringify({
    source: { type: 'image', mode: 'pull', protocol: 'lxd', server: urls.a, certificate, alias: 'bb' }, profiles, aliases: [{ name: `himg2-${project}` }],
  });
  for (const remote of ['ref', 'b']) {
    const project = remote === 'b' ? 'public' : 'default';
    if (remote === 'b') await ok(t, 'image', 'delete', `b:${fp}`, '--project', 'public');
    else await ok(t, 'image', 'delete', `ref:${fp}`);
    const unknown = await remoteLxc('query', '--wait', '-X', 'POST', `${remote}:/1.0/images?project=${project}`, '-d', body(project, ['himg2-nope']));
    if (remote === 'b') {
      t.not(unknown.status, 0);
      t.regex(unknown.stderr, /Profile "himg2-nope"/);
    } else {
      // The reference takes the request and copies the image with the default profile only.
      t.is(unknown.status, 0, unknown.stderr);
      t.deepEqual((await record(t, 'ref')).profiles, ['default']);
      await ok(t, 'image', 'delete', `ref:${fp}`);
    }
    await ok(t, 'query', '--wait', '-X', 'POST', `${remote}:/1.0/images?project=${project}`, '-d', body(project, ['himg2-extra', 'default']));
  }
  const theirs = await record(t, 'ref');
  const ours = await record(t, 'b', 'public');
  t.deepEqual(theirs.profiles, ['default'], 'the reference leaves the profiles of a pull request aside');
  t.deepEqual(ours.profiles, ['default', 'himg2-extra']);
  t.deepEqual({ ...ours, aliases: [], profiles: [] }, { ...theirs, aliases: [], profiles: [] });
  await ok(t, 'query', '-X', 'PATCH', 'a:/1.0/images/' + fp, '-d', '{"public": false}');
});

test.serial('lxc image copy of an image the target already holds: --public and --auto-update change its record as on the reference', async (t) => {
  if (noReference) return t.pass(noReference);
  await ok(t, 'project', 'create', 'b:again', '-c', 'features.profiles=false');
  await ok(t, 'image', 'delete', `ref:${fp}`);
  const steps: string[][] = [[], ['--public'], ['--auto-update'], ['--public', '--auto-update', '--alias', 'himg2-again'], []];
  for (const [i, flags] of steps.entries()) {
    await ok(t, 'image', 'copy', 'a:bb', 'ref:', ...flags);
    await ok(t, 'image', 'copy', 'a:bb', 'b:', '--target-project', 'again', ...flags);
    const theirs = await record(t, 'ref');
    const ours = await record(t, 'b', 'again');
    t.deepEqual(ours, theirs, `step ${i}: ${flags.join(' ')}`);
    // What the reference does: a request that sets public or auto_update also sets the filename (to none).
    if (i === 0) t.not(theirs.filename, '');
    if (i === 1) t.is(theirs.filename, '');
  }
});
