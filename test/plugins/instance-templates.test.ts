/**
 * Instance metadata and image templates: the renderer on its own, the metadata and template
 * routes of a real daemon (edge set), each template trigger (a create, copy or rename records it
 * in `volatile.apply_template`; the next start renders it), confinement of template targets to
 * the container root, and the real `lxc config metadata/template` commands.
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { collect, stopDaemons, waitFor, type Daemon, startWithPool } from '../helpers/daemon.js';
import { callAndWait, importImage as importImageFile } from '../helpers/api.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { lxc, lxcOk, lxcWithInput } from '../helpers/clients.js';
import { withLxcClient } from '../helpers/needs.js';
import { renderTemplate, TemplateError } from '../../plugins/instances/templates/render.js';

/** Tests that drive the lxc client: skipped, saying so, where it is not installed. */
const lxcTest = withLxcClient();

// ---------------------------------------------------------------------------------------------
// The renderer.

const ctx = {
  trigger: 'create',
  path: '/etc/hostname',
  container: { name: 'c1', architecture: 'x86_64', privileged: 'false', ephemeral: 'false' },
  config: { 'user.foo': 'bar', 'limits.cpu': '2' },
  devices: { root: { type: 'disk', path: '/', pool: 'default' }, eth0: { type: 'nic', name: 'eth0' } },
  properties: { greeting: 'hello' },
  list: ['a', 'b', 'c'],
  empty: [],
  zero: 0,
  html: '<b>&</b>',
  config_get: (key: unknown, fallback: unknown) => ((ctx.config as Record<string, string>)[String(key)] ?? fallback),
};
const r = (source: string, context: Record<string, unknown> = ctx) => renderTemplate(source, context);

test('render: output, dotted lookup, unknown variables', (t) => {
  t.is(r('{{ container.name }}\n'), 'c1\n');
  t.is(r('name={{container.name}} arch={{ container.architecture }}'), 'name=c1 arch=x86_64');
  t.is(r('[{{ nothere }}][{{ nothere.deeper.still }}][{{ container.nope }}]'), '[][][]');
  t.is(r('{{ devices.root.pool }} {{ list.1 }}'), 'default b');
  t.is(r('{{ config.user.foo }}'), '', 'keys with dots are not paths, as the reference gives');
  t.is(r('{{ "lit" }} {{ 42 }} {{ \'single\' }}'), 'lit 42 single');
  t.is(r('plain text with } and { alone'), 'plain text with } and { alone');
});

test('render: default filters and functions', (t) => {
  t.is(r('{{ nothere|default:"x" }}'), 'x');
  t.is(r('{{ nothere | default("y") }}'), 'y');
  t.is(r('{{ container.name|default:"x" }}'), 'c1');
  t.is(r('{{ zero|default:"z" }}'), 'z');
  t.is(r('{{ properties.greeting|upper }} {{ "ABC"|lower }} {{ list|join:"," }} {{ list|length }}'), 'HELLO abc a,b,c 3');
  t.is(r('{{ config_get("user.foo", "d") }} {{ config_get("user.nope", "d") }}'), 'bar d');
  t.is(r('{{ config_get("user.nope", "d")|upper }}'), 'D');
});

test('render: if, elif, else, comparisons and truthiness', (t) => {
  const pick = (cond: string) => r(`{% if ${cond} %}yes{% else %}no{% endif %}`);
  t.is(pick('trigger == "create"'), 'yes');
  t.is(pick('trigger != "create"'), 'no');
  t.is(pick('not nothere'), 'yes');
  t.is(pick('config.limits and container.name == "c1"'), 'no');
  t.is(pick('nothere or container.name'), 'yes');
  t.is(pick('list.0 == "a" && !empty'), 'yes');
  t.is(pick('zero == 0'), 'yes');
  t.is(pick('2 > 1 and 1 <= 1'), 'yes');
  t.is(pick('"b" in list'), 'yes');
  t.is(pick('"z" not in list'), 'yes');
  t.is(pick('container.privileged'), 'yes', 'the string "false" is not empty, so it is true');
  t.is(pick('container.privileged == "true"'), 'no');
  t.is(pick('empty'), 'no');
  t.is(pick('""'), 'no');
  t.is(pick('(1 == 2) or (trigger == "create" and not (zero))'), 'yes');
  const chain = (trigger: string) => r('{% if trigger == "create" %}C{% elif trigger == "start" %}S{% elif trigger == "copy" %}P{% else %}O{% endif %}', { trigger });
  t.deepEqual(['create', 'start', 'copy', 'rename'].map(chain), ['C', 'S', 'P', 'O']);
  t.is(r('{% if a %}{% if b %}ab{% else %}a{% endif %}{% endif %}', { a: 1, b: 0 }), 'a');
});

test('render: for loops, comments, set, trimming, escaping', (t) => {
  t.is(r('{% for x in list %}{{ x }};{% endfor %}'), 'a;b;c;');
  t.is(r('{% for x in list reversed %}{{ x }}{% endfor %}'), 'cba');
  t.is(r('{% for name, dev in devices %}{{ name }}={{ dev.type }} {% endfor %}'), 'eth0=nic root=disk ', 'maps walk in key order');
  t.is(r('{% for x in empty %}x{% empty %}none{% endfor %}'), 'none');
  t.is(r('{% for x in list %}{{ forloop.Counter }}{% if forloop.Last %}.{% endif %}{% endfor %}'), '123.');
  t.is(r('a{# a comment {{ with }} tags #}b{% comment %}{% bogus %}{% endcomment %}c'), 'abc');
  t.is(r('{% set who = container.name %}hi {{ who }}'), 'hi c1');
  t.is(r('a\n  {%- if 1 -%}\n  b\n  {%- endif -%}\n  c'), 'abc');
  t.is(r('{{ html }}'), '<b>&</b>', 'no HTML escaping: these are config files');
  t.is(r('{% autoescape on %}{{ html }}{% endautoescape %}'), '&lt;b&gt;&amp;&lt;/b&gt;');
});

test('render: only own data is reachable', (t) => {
  t.is(r('{{ container.constructor }}{{ container.__proto__ }}{{ list.constructor.name }}{{ config.toString }}'), '');
  t.is(r('{% if container.hasOwnProperty %}bad{% endif %}'), '');
  t.throws(() => r('{{ container.constructor("x") }}'), { instanceOf: TemplateError });
});

test('render: syntax errors name the line', (t) => {
  const bad: [string, RegExp][] = [
    ['{% if trigger %}\nopen', /line 1.*never closed/],
    ['ok\n{{ container.name', /line 2.*never closed/],
    ['a\nb\n{% frobnicate %}', /line 3.*unknown or misplaced tag "frobnicate"/],
    ['{{ x|nosuchfilter }}', /unknown filter/],
    ['{% endif %}', /misplaced/],
    ['{% for x list %}{% endfor %}', /malformed/],
    ['{{ "unterminated }}', /unterminated string/],
    ['{{ }}', /empty/],
    ['{{ a b }}', /unexpected/],
  ];
  for (const [source, message] of bad) {
    const err = t.throws(() => r(source), { instanceOf: TemplateError }, source);
    t.regex(err!.message, message, source);
  }
});

// ---------------------------------------------------------------------------------------------
// A real daemon.

let d: Daemon;
let busybox: BusyboxImage;
let work: string;

const call = (method: string, url: string, body?: unknown, headers?: Record<string, string>) => callAndWait(d, method, url, body, headers);
const importTarball = (file: string, alias: string) => importImageFile(d, file, alias);

/** A busybox image with its own metadata and templates, its rootfs shaped further by `rootfs`. */
async function importImage(alias: string, templates: string, files: Record<string, string>, rootfs?: (root: string) => void): Promise<void> {
  const dir = mkdtempSync(path.join(work, 'img-'));
  // Runnable: templates render at the start.
  execFileSync('tar', ['-xzf', busybox.unified, '-C', dir, 'rootfs']);
  mkdirSync(path.join(dir, 'rootfs/etc'), { recursive: true });
  mkdirSync(path.join(dir, 'templates'));
  rootfs?.(path.join(dir, 'rootfs'));
  writeFileSync(path.join(dir, 'metadata.yaml'), `architecture: x86_64\ncreation_date: ${Math.floor(Date.now() / 1000)}\nproperties:\n  os: test\n  alias: ${alias}\ntemplates:\n${templates}`);
  for (const [name, content] of Object.entries(files)) {
    if (content.startsWith('symlink:')) symlinkSync(content.slice('symlink:'.length), path.join(dir, 'templates', name));
    else writeFileSync(path.join(dir, 'templates', name), content);
  }
  const tarball = path.join(work, `${alias}.tar.gz`);
  execFileSync('tar', ['-czf', tarball, '-C', dir, 'metadata.yaml', 'templates', 'rootfs']);
  await importTarball(tarball, alias);
}

const volume = (name: string) => path.join(d.dir, 'storage-pools', 'default', 'containers', name);
const inRoot = (name: string, file: string) => path.join(volume(name), 'rootfs', file);
const read = (name: string, file: string) => readFileSync(inRoot(name, file), 'utf8');

async function create(name: string, alias: string, extra: Record<string, unknown> = {}) {
  return call('POST', '/1.0/instances', { name, source: { type: 'image', alias }, ...extra });
}

async function createOk(t: any, name: string, alias: string, extra: Record<string, unknown> = {}) {
  const res = await create(name, alias, extra);
  t.is(res.op?.status, 'Success', `create ${name}: ${res.op?.err ?? res.json?.error}`);
}

/** The trigger a start still owes the instance. */
const waiting = async (name: string): Promise<string | undefined> => (await call('GET', `/1.0/instances/${name}`)).json.metadata.config['volatile.apply_template'];

/** Start and stop: the start renders what a create, copy or rename left waiting. */
async function startStop(t: any, name: string) {
  const started = await call('PUT', `/1.0/instances/${name}/state`, { action: 'start' });
  t.is(started.op?.status, 'Success', `start ${name}: ${started.op?.err ?? started.json?.error}`);
  t.is((await call('PUT', `/1.0/instances/${name}/state`, { action: 'stop', force: true })).op?.status, 'Success');
}

test.before(async () => {
  busybox = buildBusyboxImage('gzip');
  work = mkdtempSync(path.join(tmpdir(), 'corral-tpl-'));
  d = await startWithPool();
  await importTarball(busybox.unified, 'bb');
});

test.after.always(async () => {
  for (const name of (await d.request('GET', '/1.0/instances').catch(() => undefined))?.json?.metadata ?? []) {
    await call('PUT', `${name}/state`, { action: 'stop', force: true }).catch(() => {});
  }
  await stopDaemons();
  rmSync(busybox.dir, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

test.serial('metadata: GET, PUT, PATCH, ETag and If-Match, bad input (container_edit_metadata)', async (t) => {
  await createOk(t, 'meta', 'bb');
  const events = collect(await d.websocket('/1.0/events?type=lifecycle'));

  const got = await call('GET', '/1.0/instances/meta/metadata');
  t.is(got.status, 200);
  const md = got.json.metadata;
  t.is(md.architecture, 'x86_64');
  t.true(md.creation_date > 0);
  t.is(md.expiry_date, 0);
  t.is(md.properties.os, 'Busybox');
  t.deepEqual(md.templates['/etc/hostname'], { when: ['create', 'copy', 'rename'], create_only: false, template: 'hostname.tpl', properties: null });
  const etag = got.headers.etag;
  t.truthy(etag);
  t.deepEqual((await call('GET', '/1.0/containers/meta/metadata')).json.metadata, md, 'legacy path');
  t.is((await call('GET', '/1.0/instances/nope/metadata')).status, 404);

  // PUT replaces, written as YAML in the volume.
  const edited = { ...md, properties: { os: 'Edited', release: '2' }, templates: { ...md.templates, '/etc/motd': { when: ['start'], template: 'motd.tpl', properties: { who: 'me' }, create_only: true } } };
  t.is((await call('PUT', '/1.0/instances/meta/metadata', edited, { 'If-Match': etag })).status, 200);
  const onDisk = parse(readFileSync(path.join(volume('meta'), 'metadata.yaml'), 'utf8'));
  t.is(onDisk.properties.os, 'Edited');
  t.deepEqual(onDisk.templates['/etc/motd'], { when: ['start'], create_only: true, template: 'motd.tpl', properties: { who: 'me' } });
  t.deepEqual(Object.keys(onDisk), ['architecture', 'creation_date', 'expiry_date', 'properties', 'templates']);
  const after = await call('GET', '/1.0/instances/meta/metadata');
  t.not(after.headers.etag, etag);
  t.is(after.json.metadata.properties.os, 'Edited');

  // A stale ETag is refused, for PUT and PATCH alike; nothing changes.
  t.is((await call('PUT', '/1.0/instances/meta/metadata', md, { 'If-Match': etag })).status, 412);
  t.is((await call('PATCH', '/1.0/instances/meta/metadata', { architecture: 'aarch64' }, { 'If-Match': etag })).status, 412);
  t.is((await call('GET', '/1.0/instances/meta/metadata')).json.metadata.properties.os, 'Edited');

  // PATCH merges maps one level down.
  t.is((await call('PATCH', '/1.0/instances/meta/metadata', { properties: { extra: 'x' } }, { 'If-Match': after.headers.etag })).status, 200);
  const patched = (await call('GET', '/1.0/instances/meta/metadata')).json.metadata;
  t.deepEqual(patched.properties, { os: 'Edited', release: '2', extra: 'x' });
  t.truthy(patched.templates['/etc/hostname'], 'templates kept');

  for (const bad of [
    [1, 2], 'text', { architecture: 5 }, { creation_date: 'yesterday' }, { properties: { a: 1 } }, { properties: ['a'] },
    { templates: { '/x': { when: 'create', template: 'a.tpl' } } }, { templates: { '/x': { when: ['create'], template: '../../etc/passwd' } } },
    { templates: { '/x': { when: ['create'], template: 'a.tpl', create_only: 'yes' } } }, { templates: { '/x': 'a.tpl' } },
    { templates: { '/x': { when: ['create'], template: 'a.tpl', mode: 'rwx' } } },
  ]) {
    const res = await call('PUT', '/1.0/instances/meta/metadata', bad);
    t.is(res.status, 400, JSON.stringify(bad));
  }
  t.is((await call('GET', '/1.0/instances/meta/metadata')).json.metadata.properties.extra, 'x', 'bad edits changed nothing');
  // Unknown top-level fields are ignored (clients echo what they read).
  t.is((await call('PUT', '/1.0/instances/meta/metadata', { ...patched, bogus: true })).status, 200);

  await waitFor(() => events.filter((e) => e.metadata.action === 'instance-metadata-updated').length >= 3, 5000, 'update events');
  const retrieved = events.find((e) => e.metadata.action === 'instance-metadata-retrieved');
  t.is(retrieved?.metadata.source, '/1.0/instances/meta/metadata');
  t.is(events.find((e) => e.metadata.action === 'instance-metadata-updated')?.metadata.source, '/1.0/instances/meta/metadata');
  t.is((await call('DELETE', '/1.0/instances/meta')).op?.status, 'Success');
});

test.serial('metadata of an instance without an image: empty values', async (t) => {
  t.is((await call('POST', '/1.0/instances', { name: 'bare', source: { type: 'none' } })).op?.status, 'Success');
  const got = await call('GET', '/1.0/instances/bare/metadata');
  t.deepEqual(got.json.metadata, { architecture: '', creation_date: 0, expiry_date: 0, properties: null, templates: null });
  t.deepEqual((await call('GET', '/1.0/instances/bare/metadata/templates')).json.metadata, []);
  t.is((await call('POST', '/1.0/instances/bare/metadata/templates?path=a.tpl', 'x', { 'content-type': 'application/octet-stream' })).status, 200);
  t.deepEqual((await call('GET', '/1.0/instances/bare/metadata/templates')).json.metadata, ['a.tpl']);
  t.is((await call('DELETE', '/1.0/instances/bare')).op?.status, 'Success');
});

test.serial('templates: list, get, create, replace, delete, bad names', async (t) => {
  await createOk(t, 'tpl', 'bb');
  const events = collect(await d.websocket('/1.0/events?type=lifecycle'));
  const base = '/1.0/instances/tpl/metadata/templates';
  const rawPost = (method: string, name: string, body: string) => call(method, `${base}?path=${encodeURIComponent(name)}`, body, { 'content-type': 'application/octet-stream' });

  t.deepEqual((await call('GET', base)).json.metadata, ['hostname.tpl']);
  const one = await call('GET', `${base}?path=hostname.tpl`);
  t.is(one.status, 200);
  t.is(one.headers['content-type'], 'application/octet-stream');
  t.is(one.body, '{{ container.name }}\n');

  t.is((await rawPost('POST', 'new.tpl', 'hello {{ instance.name }}')).status, 200);
  t.deepEqual((await call('GET', base)).json.metadata, ['hostname.tpl', 'new.tpl']);
  t.is((await call('GET', `${base}?path=new.tpl`)).body, 'hello {{ instance.name }}');
  t.is((await rawPost('PUT', 'new.tpl', 'replaced')).status, 200);
  t.is((await call('GET', `${base}?path=new.tpl`)).body, 'replaced');
  t.is((await rawPost('POST', 'new.tpl', 'again')).status, 200, 'POST replaces too, as the reference does');
  t.is(readFileSync(path.join(volume('tpl'), 'templates', 'new.tpl'), 'utf8'), 'again');
  t.is((await rawPost('POST', 'empty.tpl', '')).status, 200);
  t.is((await call('GET', `${base}?path=empty.tpl`)).body, '');
  t.is((await call('GET', `/1.0/containers/tpl/metadata/templates?path=new.tpl`)).body, 'again', 'legacy path');

  t.is((await call('DELETE', `${base}?path=new.tpl`)).status, 200);
  const gone = await call('DELETE', `${base}?path=new.tpl`);
  t.is(gone.status, 404);
  t.regex(gone.json.error, /Template "new.tpl" not found/);
  t.is((await call('GET', `${base}?path=new.tpl`)).status, 404);
  t.is((await call('DELETE', `${base}?path=empty.tpl`)).status, 200);

  for (const bad of ['../x', 'a/b', '..', '.', '/etc/passwd', '../../metadata.yaml']) {
    for (const method of ['POST', 'PUT']) t.is((await rawPost(method, bad, 'x')).status, 400, `${method} ${bad}`);
    t.is((await call('GET', `${base}?path=${encodeURIComponent(bad)}`)).status, 400, `GET ${bad}`);
    t.is((await call('DELETE', `${base}?path=${encodeURIComponent(bad)}`)).status, 400, `DELETE ${bad}`);
  }
  const huge = await call('POST', `${base}?path=huge.tpl`, Buffer.alloc(8 * 1024 * 1024 + 1, 'x'), { 'content-type': 'application/octet-stream' });
  t.is(huge.status, 400, huge.body.slice(0, 200));
  const missing = await call('POST', base, 'x', { 'content-type': 'application/octet-stream' });
  t.is(missing.status, 400);
  t.regex(missing.json.error, /missing path/);
  t.is((await call('DELETE', base)).status, 400);
  t.deepEqual(readdirSync(volume('tpl')).sort(), ['metadata.yaml', 'rootfs', 'templates']);
  t.deepEqual(readdirSync(path.join(volume('tpl'), 'templates')), ['hostname.tpl']);
  t.is((await call('GET', '/1.0/instances/nope/metadata/templates')).status, 404);

  await waitFor(() => events.filter((e) => e.metadata.action === 'instance-metadata-template-deleted').length >= 2, 5000, 'delete events');
  const created = events.find((e) => e.metadata.action === 'instance-metadata-template-created');
  t.is(created?.metadata.source, '/1.0/instances/tpl/metadata/templates');
  t.deepEqual(created?.metadata.context, { path: 'new.tpl' });
  t.deepEqual(events.find((e) => e.metadata.action === 'instance-metadata-template-retrieved')?.metadata.context, { path: 'hostname.tpl' });
  t.is(events.filter((e) => e.metadata.action === 'instance-metadata-template-retrieved').length, 5, 'listing emits nothing');
  t.is((await call('DELETE', '/1.0/instances/tpl')).op?.status, 'Success');
});

test.serial('triggers: create, copy and rename are recorded and render the hostname at the next start', async (t) => {
  await createOk(t, 'orig', 'bb');
  t.is(await waiting('orig'), 'create');
  t.false(existsSync(inRoot('orig', 'etc/hostname')), 'nothing is rendered before the start');
  await startStop(t, 'orig');
  t.is(await waiting('orig'), undefined);
  t.is(read('orig', 'etc/hostname'), 'orig\n');
  const st = statSync(inRoot('orig', 'etc/hostname'));
  t.is(st.mode & 0o777, 0o644);
  t.is(st.uid, 0);

  const copy = await call('POST', '/1.0/instances', { name: 'dup', source: { type: 'copy', source: 'orig' } });
  t.is(copy.op?.status, 'Success', copy.op?.err);
  t.is(await waiting('dup'), 'copy');
  t.is(read('dup', 'etc/hostname'), 'orig\n', 'the source content until the start');
  await startStop(t, 'dup');
  t.is(read('dup', 'etc/hostname'), 'dup\n');
  t.is(read('orig', 'etc/hostname'), 'orig\n');

  const renamed = await call('POST', '/1.0/instances/dup', { name: 'moved' });
  t.is(renamed.op?.status, 'Success', renamed.op?.err);
  t.is(await waiting('moved'), 'rename');
  await startStop(t, 'moved');
  t.is(read('moved', 'etc/hostname'), 'moved\n');
  for (const name of ['orig', 'moved']) t.is((await call('DELETE', `/1.0/instances/${name}`)).op?.status, 'Success');
});

test.serial('trigger context: properties, config, devices, config_get, path, instance fields', async (t) => {
  await importImage('ctximg', [
    '  /etc/ctx:',
    '    when: [create, copy, rename]',
    '    template: ctx.tpl',
    '    properties:',
    '      flavour: vanilla',
    '      count: 3',
    '  etc/relative/deep/file:',
    '    when: [create]',
    '    template: plain.tpl',
    '  /etc/owned:',
    '    when: [create]',
    '    template: plain.tpl',
    '    uid: "1000"',
    '    gid: "1000"',
    '    mode: "0600"',
    '  /etc/only-on-copy:',
    '    when: [copy]',
    '    template: plain.tpl',
    '',
  ].join('\n'), {
    'ctx.tpl': [
      '{{ trigger }} {{ path }}',
      '{{ container.name }} {{ instance.name }} {{ instance.type }} {{ container.architecture }} {{ container.privileged }} {{ container.ephemeral }}',
      '{{ properties.flavour }} {{ properties.count }}',
      '{{ config_get("user.foo", "none") }} {{ config_get("user.unset", "none") }} {{ config.volatile }}',
      '{% for name, dev in devices %}{{ name }}:{{ dev.type }} {% endfor %}',
      '',
    ].join('\n'),
    'plain.tpl': 'plain {{ trigger }}\n',
  });
  await createOk(t, 'ctx1', 'ctximg', { config: { 'user.foo': 'bar', 'security.privileged': 'true' }, ephemeral: false, devices: { extra: { type: 'none' } } });
  await startStop(t, 'ctx1');
  t.is(read('ctx1', 'etc/ctx'), 'create /etc/ctx\nctx1 ctx1 container x86_64 true false\nvanilla 3\nbar none \nextra:none root:disk \n');
  t.is(read('ctx1', 'etc/relative/deep/file'), 'plain create\n', 'relative targets start at the root; parents are created');
  t.is(statSync(inRoot('ctx1', 'etc/relative/deep')).mode & 0o777, 0o755);
  const owned = statSync(inRoot('ctx1', 'etc/owned'));
  t.deepEqual([owned.uid, owned.gid, owned.mode & 0o777], [1000, 1000, 0o600]);
  t.false(existsSync(inRoot('ctx1', 'etc/only-on-copy')));

  const copy = await call('POST', '/1.0/instances', { name: 'ctx2', source: { type: 'copy', source: 'ctx1' } });
  t.is(copy.op?.status, 'Success', copy.op?.err);
  await startStop(t, 'ctx2');
  t.regex(read('ctx2', 'etc/ctx'), /^copy \/etc\/ctx\nctx2 ctx2 /);
  t.is(read('ctx2', 'etc/only-on-copy'), 'plain copy\n');
  for (const name of ['ctx1', 'ctx2']) t.is((await call('DELETE', `/1.0/instances/${name}`)).op?.status, 'Success');
});

test.serial('create_only leaves an existing file alone and creates a missing one', async (t) => {
  await importImage('onceimg', [
    '  /etc/keep:',
    '    when: [create]',
    '    template: t.tpl',
    '    create_only: true',
    '  /etc/fresh:',
    '    when: [create, rename]',
    '    template: t.tpl',
    '    create_only: true',
    '  /etc/always:',
    '    when: [create, rename]',
    '    template: t.tpl',
    '',
  ].join('\n'), { 't.tpl': '{{ trigger }} {{ instance.name }}' }, (root) => writeFileSync(path.join(root, 'etc/keep'), 'from the image\n'));
  await createOk(t, 'once', 'onceimg');
  await startStop(t, 'once');
  t.is(read('once', 'etc/keep'), 'from the image\n');
  t.is(read('once', 'etc/fresh'), 'create once');
  t.is(read('once', 'etc/always'), 'create once');
  t.is((await call('POST', '/1.0/instances/once', { name: 'twice' })).op?.status, 'Success');
  await startStop(t, 'twice');
  t.is(read('twice', 'etc/fresh'), 'create once', 'create_only: not rewritten on rename');
  t.is(read('twice', 'etc/always'), 'rename twice');
  t.is((await call('DELETE', '/1.0/instances/twice')).op?.status, 'Success');
});

test.serial('a broken template fails the first start with a clear error and the trigger stays waiting', async (t) => {
  await importImage('brokenimg', '  /etc/a:\n    when: [create]\n    template: a.tpl\n  /etc/b:\n    when: [create]\n    template: b.tpl\n', {
    'a.tpl': 'fine\n', 'b.tpl': 'line one\n{% if instance.name %}never closed\n',
  });
  await createOk(t, 'broken', 'brokenimg');
  const res = await call('PUT', '/1.0/instances/broken/state', { action: 'start' });
  t.is(res.op?.status, 'Failure');
  t.regex(res.op?.err ?? '', /template "b\.tpl".*\/etc\/b.*line 2.*never closed/);
  t.is((await call('GET', '/1.0/instances/broken')).json.metadata.status, 'Stopped');
  t.is(await waiting('broken'), 'create');

  await importImage('missingimg', '  /etc/a:\n    when: [create]\n    template: nothere.tpl\n', {});
  await createOk(t, 'missing', 'missingimg');
  const missing = await call('PUT', '/1.0/instances/missing/state', { action: 'start' });
  t.is(missing.op?.status, 'Failure');
  t.regex(missing.op?.err ?? '', /nothere\.tpl.*not found/);
  t.is(await waiting('missing'), 'create');
  for (const name of ['broken', 'missing']) t.is((await call('DELETE', `/1.0/instances/${name}`)).op?.status, 'Success');
});

test.serial('template targets from a malicious image never leave the container root', async (t) => {
  const outside = mkdtempSync(path.join(tmpdir(), 'corral-outside-'));
  await importImage('evilimg', [
    `  ../../../../../../../..${outside}/dotdot:`,
    '    when: [create]',
    '    template: t.tpl',
    '  /etc/abslink/through-abs:',
    '    when: [create]',
    '    template: t.tpl',
    '  /etc/rellink/through-rel:',
    '    when: [create]',
    '    template: t.tpl',
    '  /etc/filelink:',
    '    when: [create]',
    '    template: t.tpl',
    '',
  ].join('\n'), { 't.tpl': 'pwned {{ path }}\n' }, (root) => {
    symlinkSync(outside, path.join(root, 'etc/abslink'));
    symlinkSync(`../../../../../../../../..${outside}`, path.join(root, 'etc/rellink'));
    symlinkSync(`${outside}/target-file`, path.join(root, 'etc/filelink'));
  });
  await createOk(t, 'evil', 'evilimg');
  await startStop(t, 'evil');
  t.deepEqual(readdirSync(outside), [], 'nothing was written outside the root');
  // Every write landed inside the root: `..` stops at the root, links resolve from the root.
  const root = path.join(volume('evil'), 'rootfs');
  t.is(readFileSync(path.join(root, outside, 'dotdot'), 'utf8'), `pwned ../../../../../../../..${outside}/dotdot\n`);
  t.regex(readFileSync(path.join(root, outside, 'through-abs'), 'utf8'), /^pwned/);
  t.regex(readFileSync(path.join(root, outside, 'through-rel'), 'utf8'), /^pwned/);
  t.regex(readFileSync(path.join(root, outside, 'target-file'), 'utf8'), /^pwned/);
  t.is((await call('DELETE', '/1.0/instances/evil')).op?.status, 'Success');

  // A template file that is a link to a host file is refused at import (and never read at apply: template-files.ts).
  const secret = path.join(outside, 'secret');
  writeFileSync(secret, 'host secret\n');
  await t.throwsAsync(importImage('leakimg', '  /etc/leak:\n    when: [create]\n    template: leak.tpl\n', { 'leak.tpl': `symlink:${secret}` }),
    { message: /template "leak\.tpl" for "\/etc\/leak" must be a regular file, not a symbolic link/ });
  t.not((await create('leak', 'leakimg')).op?.status, 'Success', 'no image under that alias');
  t.false(existsSync(volume('leak')));
  rmSync(outside, { recursive: true, force: true });
});

test.serial('start applies start templates before the instance runs', async (t) => {
  await createOk(t, 'runner', 'bb', { config: { 'user.greeting': 'hi' } });
  const base = '/1.0/instances/runner/metadata';
  const md = (await call('GET', base)).json.metadata;
  md.templates['/etc/started'] = { when: ['start'], template: 'started.tpl', properties: { p: 'v' } };
  md.templates['/etc/started-once'] = { when: ['start'], template: 'started.tpl', create_only: true };
  t.is((await call('PUT', base, md)).status, 200);
  t.is((await call('POST', `${base}/templates?path=started.tpl`, '{{ trigger }} {{ instance.name }} {{ config_get("user.greeting", "none") }} {{ properties.p|default:"-" }}\n', { 'content-type': 'application/octet-stream' })).status, 200);
  t.false(existsSync(inRoot('runner', 'etc/started')));

  const start = await call('PUT', '/1.0/instances/runner/state', { action: 'start' });
  t.is(start.op?.status, 'Success', start.op?.err);
  t.is((await call('GET', '/1.0/instances/runner')).json.metadata.status, 'Running');
  t.is(read('runner', 'etc/started'), 'start runner hi v\n');
  t.is(read('runner', 'etc/started-once'), 'start runner hi -\n');
  t.is((await call('PUT', '/1.0/instances/runner/state', { action: 'stop', force: true })).op?.status, 'Success');

  writeFileSync(inRoot('runner', 'etc/started-once'), 'kept\n');
  const patched = await call('PATCH', '/1.0/instances/runner', { config: { 'user.greeting': 'again' } });
  t.true(patched.status < 300 && (patched.op === undefined || patched.op.status === 'Success'), JSON.stringify(patched.json));
  t.is((await call('PUT', '/1.0/instances/runner/state', { action: 'start' })).op?.status, 'Success');
  t.is(read('runner', 'etc/started'), 'start runner again v\n', 'rendered again at every start, with the current config');
  t.is(read('runner', 'etc/started-once'), 'kept\n');
  t.is((await call('PUT', '/1.0/instances/runner/state', { action: 'stop', force: true })).op?.status, 'Success');

  // A start template that fails to render fails the start.
  t.is((await call('POST', `${base}/templates?path=started.tpl`, '{% if %}', { 'content-type': 'application/octet-stream' })).status, 200);
  const failed = await call('PUT', '/1.0/instances/runner/state', { action: 'start' });
  t.is(failed.op?.status, 'Failure');
  t.regex(failed.op?.err ?? '', /started\.tpl/);
  t.is((await call('GET', '/1.0/instances/runner')).json.metadata.status, 'Stopped');
  t.is((await call('DELETE', '/1.0/instances/runner')).op?.status, 'Success');
});

lxcTest('lxc config metadata and lxc config template', async (t) => {
  await createOk(t, 'cli', 'bb');
  const ok = (...args: string[]) => lxcOk(t, d.socket, ...args);
  const shown = parse(await ok('config', 'metadata', 'show', 'cli'));
  t.is(shown.architecture, 'x86_64');
  t.is(shown.templates['/etc/hostname'].template, 'hostname.tpl');
  t.regex(await ok('config', 'template', 'list', 'cli'), /hostname\.tpl/);
  t.is(await ok('config', 'template', 'show', 'cli', 'hostname.tpl'), '{{ container.name }}\n');
  await ok('config', 'template', 'create', 'cli', 'fresh.tpl');
  const listed = await ok('config', 'template', 'list', 'cli', '--format', 'csv');
  t.deepEqual(listed.trim().split('\n').sort(), ['fresh.tpl', 'hostname.tpl']);
  await ok('config', 'template', 'delete', 'cli', 'fresh.tpl');
  t.notRegex(await ok('config', 'template', 'list', 'cli'), /fresh\.tpl/);
  // edit reads the new content from a stdin that is not a terminal.
  const edited = await lxcWithInput(d.socket, 'edited {{ instance.name }}\n', 'config', 'template', 'edit', 'cli', 'hostname.tpl');
  t.is(edited.status, 0, edited.stderr);
  t.is(await ok('config', 'template', 'show', 'cli', 'hostname.tpl'), 'edited {{ instance.name }}\n');
  const yaml = (await ok('config', 'metadata', 'show', 'cli')).replace(/os: Busybox/, 'os: Changed');
  const metaEdit = await lxcWithInput(d.socket, yaml, 'config', 'metadata', 'edit', 'cli');
  t.is(metaEdit.status, 0, metaEdit.stderr);
  t.is((await call('GET', '/1.0/instances/cli/metadata')).json.metadata.properties.os, 'Changed');
  t.is((await call('POST', '/1.0/instances/cli', { name: 'cli2' })).op?.status, 'Success');
  await startStop(t, 'cli2');
  t.is(read('cli2', 'etc/hostname'), 'edited cli2\n', 'the edited template is used');
  const missing = await lxc(d.socket, 'config', 'template', 'show', 'cli2', 'fresh.tpl');
  t.not(missing.status, 0);
  t.regex(missing.stderr, /not found/);
  t.is((await call('DELETE', '/1.0/instances/cli2')).op?.status, 'Success');
});
