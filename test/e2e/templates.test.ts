/**
 * Image templates through the real `lxc` client, flow by flow as the reference daemon runs them:
 * a create, copy or rename records its trigger in `volatile.apply_template`, the next start renders
 * that trigger's templates (then the `start` ones) and clears the key; snapshots, restores, moves,
 * backups and publishing carry the key as the reference does; a template that fails fails the start
 * and leaves the key for the next one.
 */
import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { killContainers, startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { lxc, lxcOk, lxcWithInput } from '../helpers/clients.js';
import { withLxcClient } from '../helpers/needs.js';

/** Tests that drive the lxc client: skipped, saying so, where it is not installed. */
const lxcTest = withLxcClient();

let d: Daemon;
let image: BusyboxImage;
let work: string;

/** One template per trigger, one for several, one create_only, one with properties: what the reference flows were run with. */
const TEMPLATES = {
  yaml: [
    '  /etc/created:',
    '    when: [create]',
    '    template: created.tpl',
    '    properties:',
    '      greeting: hello',
    '  /etc/copied:',
    '    when: [copy]',
    '    template: copied.tpl',
    '  /etc/started:',
    '    when: [start]',
    '    template: started.tpl',
    '  /etc/renamed:',
    '    when: [rename]',
    '    template: renamed.tpl',
    '  /etc/multi:',
    '    when: [create, copy, rename]',
    '    template: multi.tpl',
    '  /etc/once:',
    '    when: [start]',
    '    create_only: true',
    '    template: once.tpl',
  ].join('\n'),
  files: {
    'created.tpl': 'created trigger={{ trigger }} name={{ container.name }} path={{ path }} greet={{ properties.greeting }} user={{ config_get("user.foo", "unset") }}\n',
    'copied.tpl': 'copied trigger={{ trigger }} name={{ container.name }}\n',
    'started.tpl': 'started trigger={{ trigger }} name={{ container.name }} user={{ config_get("user.foo", "unset") }}\n',
    'renamed.tpl': 'renamed trigger={{ trigger }} name={{ container.name }}\n',
    'multi.tpl': 'multi trigger={{ trigger }} name={{ container.name }}\n',
    'once.tpl': 'once {{ trigger }}\n',
  },
};

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);

/** `volatile.apply_template` as `lxc config show` prints it; undefined when absent. */
async function pending(t: any, name: string, ...flags: string[]): Promise<string | undefined> {
  return parse(await run(t, 'config', 'show', name, ...flags)).config['volatile.apply_template'];
}

/** A file of the container as `lxc file pull` gives it; undefined when there is none. */
async function pull(name: string, file: string, ...flags: string[]): Promise<string | undefined> {
  const res = await lxc(d.socket, 'file', 'pull', `${name}${file}`, '-', ...flags);
  return res.status === 0 ? res.stdout : undefined;
}

async function startStop(t: any, name: string, ...flags: string[]): Promise<void> {
  await run(t, 'start', name, ...flags);
  await run(t, 'stop', name, '--force', ...flags);
}

test.before(async () => {
  image = buildBusyboxImage('gzip', TEMPLATES);
  work = mkdtempSync(path.join(tmpdir(), 'corral-e2e-tpl-'));
  // The full set: the flows cross projects and pools.
  d = await startWithPool({ plugins: 'full' });
  await importImage(d, image.unified, 'tpl');
});

test.after.always(async () => {
  killContainers(d?.dir);
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

lxcTest('lxc init records create; the first start renders create then start templates and clears the key', async (t) => {
  await run(t, 'init', 'tpl', 'a');
  t.is(await pending(t, 'a'), 'create');
  for (const file of ['/etc/created', '/etc/multi', '/etc/started', '/etc/once', '/etc/hostname']) {
    t.is(await pull('a', file), undefined, `${file} does not exist before the first start`);
  }
  // Templates see the config as it is at the start, not at the init.
  await run(t, 'config', 'set', 'a', 'user.foo=bar');
  await run(t, 'start', 'a');
  t.is(await pending(t, 'a'), undefined, 'the key is cleared once applied');
  t.is(await pull('a', '/etc/created'), 'created trigger=create name=a path=/etc/created greet=hello user=bar\n');
  t.is(await pull('a', '/etc/multi'), 'multi trigger=create name=a\n');
  t.is(await pull('a', '/etc/started'), 'started trigger=start name=a user=bar\n');
  t.is(await pull('a', '/etc/once'), 'once start\n');
  t.is(await pull('a', '/etc/hostname'), 'a\n');
  t.is(await pull('a', '/etc/copied'), undefined);
  t.is(await pull('a', '/etc/renamed'), undefined);
  t.is((await run(t, 'exec', 'a', '--', 'cat', '/etc/created')).trim(), 'created trigger=create name=a path=/etc/created greet=hello user=bar', 'the container sees them');
  await run(t, 'stop', 'a', '--force');

  // Later starts render only the start templates; create_only leaves what exists.
  await run(t, 'config', 'set', 'a', 'user.foo=again');
  await startStop(t, 'a');
  t.is(await pending(t, 'a'), undefined);
  t.is(await pull('a', '/etc/created'), 'created trigger=create name=a path=/etc/created greet=hello user=bar\n', 'create templates render once');
  t.is(await pull('a', '/etc/started'), 'started trigger=start name=a user=again\n');
  t.is(await pull('a', '/etc/once'), 'once start\n');

  // An empty instance owes its create templates too (it has none to render).
  await run(t, 'init', '--empty', 'blank');
  t.is(await pending(t, 'blank'), 'create');
});

lxcTest('lxc copy records copy; lxc move renames record rename unless a trigger still waits', async (t) => {
  await run(t, 'copy', 'a', 'b');
  t.is(await pending(t, 'b'), 'copy');
  t.is(await pending(t, 'a'), undefined, 'the source is untouched');
  t.is(await pull('b', '/etc/copied'), undefined);
  t.is(await pull('b', '/etc/hostname'), 'a\n', 'the copy holds the source files until it starts');
  await run(t, 'start', 'b');
  t.is(await pending(t, 'b'), undefined);
  t.is(await pull('b', '/etc/copied'), 'copied trigger=copy name=b\n');
  t.is(await pull('b', '/etc/multi'), 'multi trigger=copy name=b\n');
  t.is(await pull('b', '/etc/hostname'), 'b\n');
  t.is(await pull('b', '/etc/created'), 'created trigger=create name=a path=/etc/created greet=hello user=bar\n', 'create templates are not rendered again');
  await run(t, 'stop', 'b', '--force');

  await run(t, 'move', 'b', 'c');
  t.is(await pending(t, 'c'), 'rename');
  t.is(await pull('c', '/etc/renamed'), undefined);
  await startStop(t, 'c');
  t.is(await pending(t, 'c'), undefined);
  t.is(await pull('c', '/etc/renamed'), 'renamed trigger=rename name=c\n');
  t.is(await pull('c', '/etc/multi'), 'multi trigger=rename name=c\n');
  t.is(await pull('c', '/etc/hostname'), 'c\n');

  // Renamed before its first start: it still owes create, rendered under the new name.
  await run(t, 'init', 'tpl', 'd');
  await run(t, 'move', 'd', 'e');
  t.is(await pending(t, 'e'), 'create');
  await startStop(t, 'e');
  t.is(await pull('e', '/etc/created'), 'created trigger=create name=e path=/etc/created greet=hello user=unset\n');
  t.is(await pull('e', '/etc/renamed'), undefined);
});

lxcTest('snapshots keep the waiting trigger, a restore brings it back, copies of snapshots owe copy', async (t) => {
  await run(t, 'init', 'tpl', 'f');
  await run(t, 'snapshot', 'f', 's0');
  t.is(await pending(t, 'f/s0'), 'create');
  await run(t, 'copy', 'f/s0', 'g');
  t.is(await pending(t, 'g'), 'copy');
  await run(t, 'copy', 'f', 'h');
  t.is(await pending(t, 'h'), 'copy');
  t.is(await pending(t, 'h/s0'), 'create', 'copied snapshots keep what their files still owe');

  await startStop(t, 'f');
  t.is(await pending(t, 'f'), undefined);
  await run(t, 'snapshot', 'f', 's1');
  t.is(await pending(t, 'f/s1'), undefined);
  await run(t, 'restore', 'f', 's0');
  t.is(await pending(t, 'f'), 'create', 'restored with the files that never saw their create templates');
  t.is(await pull('f', '/etc/created'), undefined);
  await startStop(t, 'f');
  t.is(await pull('f', '/etc/created'), 'created trigger=create name=f path=/etc/created greet=hello user=unset\n');
  await run(t, 'restore', 'f', 's1');
  t.is(await pending(t, 'f'), undefined);

  // A refresh copy brings content, not a trigger.
  await startStop(t, 'h');
  await run(t, 'copy', 'f', 'h', '--refresh');
  t.is(await pending(t, 'h'), undefined);
});

lxcTest('moves to another pool or project keep the key as it is; export and import keep it; publish records nothing', async (t) => {
  const poolDir = path.join(work, 'pool2');
  await run(t, 'storage', 'create', 'other', 'dir', `source=${poolDir}`);
  await run(t, 'init', 'tpl', 'm1');
  await run(t, 'move', 'm1', '--storage', 'other');
  t.is(await pending(t, 'm1'), 'create');
  await startStop(t, 'm1');
  await run(t, 'move', 'm1', 'm2', '--storage', 'default');
  t.is(await pending(t, 'm2'), undefined, 'a pool move under a new name records no rename');

  await run(t, 'project', 'create', 'p2', '-c', 'features.images=false', '-c', 'features.profiles=false');
  await run(t, 'init', 'tpl', 'm3');
  await run(t, 'move', 'm3', 'm4', '--target-project', 'p2');
  t.is(await pending(t, 'm4', '--project', 'p2'), 'create');
  await startStop(t, 'm4', '--project', 'p2');
  await run(t, 'move', 'm4', 'm5', '--project', 'p2', '--target-project', 'default');
  t.is(await pending(t, 'm5'), undefined, 'a project move under a new name records no rename');

  await run(t, 'init', 'tpl', 'x1');
  const waiting = path.join(work, 'x1.tar.gz');
  await run(t, 'export', 'x1', waiting);
  await run(t, 'import', waiting, 'x2');
  t.is(await pending(t, 'x2'), 'create', 'imported as exported, under another name too');
  await startStop(t, 'x2');
  t.is(await pull('x2', '/etc/created'), 'created trigger=create name=x2 path=/etc/created greet=hello user=unset\n');
  await startStop(t, 'x1');
  const done = path.join(work, 'x1-done.tar.gz');
  await run(t, 'export', 'x1', done);
  await run(t, 'import', done, 'x3');
  t.is(await pending(t, 'x3'), undefined);

  await run(t, 'init', 'tpl', 'pub');
  await run(t, 'publish', 'pub', '--alias', 'published');
  t.is(await pending(t, 'pub'), 'create', 'publishing changes nothing on the instance');
  await run(t, 'init', 'published', 'frompub');
  t.is(await pending(t, 'frompub'), 'create');
  await startStop(t, 'frompub');
  t.is(await pull('frompub', '/etc/created'), 'created trigger=create name=frompub path=/etc/created greet=hello user=unset\n', 'the templates travel in the image');
});

lxcTest('a template that fails at the start fails it cleanly and keeps the key for the next start', async (t) => {
  await run(t, 'init', 'tpl', 'bad');
  const md = parse(await run(t, 'config', 'metadata', 'show', 'bad'));
  md.templates['/etc/broken'] = { when: ['create'], template: 'broken.tpl', create_only: false, properties: {} };
  const edit = await lxcWithInput(d.socket, JSON.stringify(md), 'config', 'metadata', 'edit', 'bad');
  t.is(edit.status, 0, edit.stderr);

  const missing = await lxc(d.socket, 'start', 'bad');
  t.not(missing.status, 0);
  t.regex(missing.stderr, /broken\.tpl.*\/etc\/broken.*not found/);
  t.is(await pending(t, 'bad'), 'create', 'the key stays');
  t.is((await run(t, 'list', 'bad', '--format', 'csv', '-c', 's')).trim(), 'STOPPED');

  // `create` makes it empty (lxc reads no content there); `edit` reads the content from stdin.
  await run(t, 'config', 'template', 'create', 'bad', 'broken.tpl');
  const broken = await lxcWithInput(d.socket, 'line one\n{% if instance.name %}never closed\n', 'config', 'template', 'edit', 'bad', 'broken.tpl');
  t.is(broken.status, 0, broken.stderr);
  const syntax = await lxc(d.socket, 'start', 'bad');
  t.not(syntax.status, 0);
  t.regex(syntax.stderr, /broken\.tpl.*line 2.*never closed/);
  t.is(await pending(t, 'bad'), 'create');
  t.is((await run(t, 'list', 'bad', '--format', 'csv', '-c', 's')).trim(), 'STOPPED');

  const fixed = await lxcWithInput(d.socket, 'fixed {{ trigger }}\n', 'config', 'template', 'edit', 'bad', 'broken.tpl');
  t.is(fixed.status, 0, fixed.stderr);
  await run(t, 'start', 'bad');
  t.is(await pending(t, 'bad'), undefined);
  t.is(await pull('bad', '/etc/broken'), 'fixed create\n');
  t.is(await pull('bad', '/etc/created'), 'created trigger=create name=bad path=/etc/created greet=hello user=unset\n');
  await run(t, 'stop', 'bad', '--force');

  // The deferred templates applied, a start template failing: the key is already cleared, as in the reference.
  await run(t, 'init', 'tpl', 'bad2');
  t.is((await lxcWithInput(d.socket, '{% frobnicate %}\n', 'config', 'template', 'edit', 'bad2', 'started.tpl')).status, 0);
  const failed = await lxc(d.socket, 'start', 'bad2');
  t.not(failed.status, 0);
  t.regex(failed.stderr, /started\.tpl/);
  t.is(await pending(t, 'bad2'), undefined);
  t.is(await pull('bad2', '/etc/created'), 'created trigger=create name=bad2 path=/etc/created greet=hello user=unset\n');
  t.is((await run(t, 'list', 'bad2', '--format', 'csv', '-c', 's')).trim(), 'STOPPED');
});
