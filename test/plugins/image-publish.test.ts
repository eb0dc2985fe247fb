/**
 * Publishing images from instances and snapshots through a real daemon (edge set): every
 * compression, the request's fields, the reference's answers for running, missing and duplicate
 * sources, progress while packing, and the real `lxc publish` then `lxc launch`.
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { lstatSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { collect, stopDaemons, waitFor, startWithPool, type Daemon } from '../helpers/daemon.js';
import { callAndWait, importImage } from '../helpers/api.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { lxc } from '../helpers/clients.js';
import { withLxcClient } from '../helpers/needs.js';
import bunyan from 'bunyan';
import { mkdirSync } from 'node:fs';
import { createHostTools } from '../../kernel/host-tools/host-tools.js';
import { packImage } from '../../plugins/images/pack.js';
import { byteSize, progressReporter } from '../../sdk/lib/operations/index.js';

/** Tests that drive the lxc client: skipped, saying so, where it is not installed. */
const lxcTest = withLxcClient();

let d: Daemon;
let image: BusyboxImage;
let scratch: string;
let lifecycle: any[];
const MARKER = `published ${randomBytes(4).toString('hex')}\n`;

const call = (method: string, url: string, body?: unknown) => callAndWait(d, method, url, body);
const volume = (name: string) => path.join(d.dir, 'storage-pools', 'default', 'containers', name);
const events = (action: string) => lifecycle.filter((e) => e.metadata.action === action);

async function push(name: string, file: string, content: string | Buffer) {
  const res = await d.request('POST', `/1.0/instances/${name}/files?path=${encodeURIComponent(file)}`, Buffer.from(content), { 'content-type': 'application/octet-stream' });
  if (res.status !== 200) throw new Error(`push ${file}: ${res.body}`);
}

async function pull(name: string, file: string) {
  return d.request('GET', `/1.0/instances/${name}/files?path=${encodeURIComponent(file)}`);
}

async function create(name: string, source: Record<string, unknown> = { type: 'image', alias: 'bb' }) {
  const { op } = await call('POST', '/1.0/instances', { name, source });
  if (op?.status !== 'Success') throw new Error(`creating ${name}: ${op?.err}`);
}

async function state(name: string, action: 'start' | 'stop') {
  const { op } = await call('PUT', `/1.0/instances/${name}/state`, { action, force: true });
  if (op?.status !== 'Success') throw new Error(`${action} ${name}: ${op?.err}`);
}

/** Publish and answer the finished operation. */
async function publish(body: Record<string, unknown>) {
  const res = await call('POST', '/1.0/images', body);
  if (res.json?.type !== 'async') throw new Error(`publish answered ${res.status}: ${res.body}`);
  return res.op;
}

/** The exported bytes of an image, written to a file. */
async function exported(fp: string): Promise<string> {
  const res = await new Promise<Buffer>((resolve, reject) => {
    import('node:http').then(({ default: http }) => {
      http.get({ socketPath: d.socket, path: `/1.0/images/${fp}/export` }, (r) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => resolve(Buffer.concat(chunks)));
      }).on('error', reject);
    }, reject);
  });
  const file = path.join(scratch, `${fp}.export`);
  writeFileSync(file, res);
  return file;
}

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');
/** tar sniffs most compressions when reading, but not lz4 and lzma. */
function tarFlags(file: string): string[] {
  const head = readFileSync(file).subarray(0, 8);
  if (MAGIC.lz4!(head)) return ['--use-compress-program=lz4'];
  return MAGIC.lzma!(head) ? ['--lzma'] : [];
}
const members = (file: string) => execFileSync('tar', ['-t', ...tarFlags(file), '-f', file], { encoding: 'utf8', maxBuffer: 64 << 20 }).split('\n').filter(Boolean);
const memberText = (file: string, member: string) => execFileSync('tar', ['-xO', ...tarFlags(file), '-f', file, member], { encoding: 'utf8' });

const MAGIC: Record<string, (b: Buffer) => boolean> = {
  gzip: (b) => b[0] === 0x1f && b[1] === 0x8b,
  bzip2: (b) => b.subarray(0, 3).toString() === 'BZh',
  xz: (b) => b.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00])),
  lzma: (b) => b[0] === 0x5d && b[1] === 0x00,
  zstd: (b) => b.subarray(0, 4).equals(Buffer.from([0x28, 0xb5, 0x2f, 0xfd])),
  lz4: (b) => b.subarray(0, 4).equals(Buffer.from([0x04, 0x22, 0x4d, 0x18])),
  none: (b) => b.subarray(257, 262).toString() === 'ustar',
};

test.before(async () => {
  image = buildBusyboxImage('gzip');
  scratch = mkdtempSync(path.join(tmpdir(), 'corral-publish-test-'));
  d = await startWithPool();
  await importImage(d, image.unified, 'bb');
  lifecycle = collect(await d.websocket('/1.0/events?type=lifecycle'));
  await create('c1');
  await push('c1', '/root/marker.txt', MARKER);
  // Extended attributes travel with the image (written on disk, as a container's root could).
  execFileSync('setfattr', ['-n', 'user.corral', '-v', 'kept', path.join(volume('c1'), 'rootfs/root/marker.txt')]);
});

test.after.always(async () => {
  if (d) await d.request('PUT', '/1.0/instances/crun/state', { action: 'stop', force: true }).catch(() => undefined);
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

test.serial('a stopped container publishes with every compression; each image exports, unpacks and keeps owners and xattrs', async (t) => {
  const seen = new Set<string>();
  for (const algo of ['gzip', 'bzip2', 'xz', 'lzma', 'zstd', 'lz4', 'none']) {
    const op = await publish({ source: { type: 'instance', name: 'c1' }, compression_algorithm: algo });
    t.is(op.status, 'Success', `${algo}: ${op.err}`);
    const { fingerprint, size } = op.metadata;
    // The result only: the progress keys are gone once packing is over.
    t.deepEqual(Object.keys(op.metadata).sort(), ['fingerprint', 'size'], algo);
    t.false(seen.has(fingerprint), `${algo} packs differently`);
    seen.add(fingerprint);

    const shown = (await d.request('GET', `/1.0/images/${fingerprint}`)).json.metadata;
    t.is(shown.size, Number(size));
    t.is(shown.type, 'container');
    t.is(shown.architecture, 'x86_64');
    t.is(shown.public, false);
    t.is(shown.auto_update, false);
    t.is(shown.filename, '');
    t.is(shown.expires_at, '0001-01-01T00:00:00Z');
    t.deepEqual(shown.aliases, []);
    t.deepEqual(shown.profiles, ['default']);
    // The container's metadata.yaml goes in unchanged: its properties are the image's.
    t.is(shown.properties.os, 'Busybox');
    t.is(shown.properties.description, 'Busybox x86_64');

    const file = await exported(fingerprint);
    t.is(sha256(file), fingerprint, `${algo}: the fingerprint is the sha256 of the file`);
    t.true(MAGIC[algo]!(readFileSync(file)), `${algo}: the file is ${algo}`);
    const names = members(file).map((n) => n.replace(/\/$/, ''));
    t.is(names[0], 'metadata.yaml', 'metadata.yaml comes first');
    for (const want of ['rootfs/root/marker.txt', 'rootfs/bin/busybox', 'templates/hostname.tpl']) t.true(names.includes(want), `${algo}: ${want}`);
    t.false(names.some((n) => n.startsWith('/') || n.startsWith('..')));
  }

  // The image of one of them makes a new container holding what c1 held, owners and xattrs included.
  const [, fp] = [...seen];
  await create('from-bzip2', { type: 'image', fingerprint: fp });
  const got = await pull('from-bzip2', '/root/marker.txt');
  t.is(got.body, MARKER);
  const home = lstatSync(path.join(volume('from-bzip2'), 'rootfs/home/user'));
  t.deepEqual([home.uid, home.gid], [1000, 1000], 'ids are kept as numbers');
  const attr = spawnSync('getfattr', ['--only-values', '-n', 'user.corral', path.join(volume('from-bzip2'), 'rootfs/root/marker.txt')], { encoding: 'utf8' });
  t.is(attr.stdout, 'kept');
  // The image's templates came along; the first start renders them.
  await state('from-bzip2', 'start');
  await state('from-bzip2', 'stop');
  t.is((await pull('from-bzip2', '/etc/hostname')).body.trim(), 'from-bzip2', 'templates still apply');
  t.truthy(events('image-created').find((e) => e.metadata.source === `/1.0/images/${fp}` && e.metadata.context.type === 'container'));
});

test.serial('a published image boots', async (t) => {
  const op = await publish({ source: { type: 'container', name: 'c1' }, compression_algorithm: 'zstd', aliases: [{ name: 'boot-me' }], properties: { boot: 'me' } });
  t.is(op.status, 'Success', op.err);
  await create('booted', { type: 'image', alias: 'boot-me' });
  await state('booted', 'start');
  try {
    const { op: exec } = await call('POST', '/1.0/instances/booted/exec', { command: ['cat', '/root/marker.txt'], 'record-output': true, interactive: false, 'wait-for-websocket': false });
    t.is(exec.status, 'Success', exec.err);
    t.is(exec.metadata.return, 0);
    const out = await d.request('GET', exec.metadata.output['1']);
    t.is(out.body, MARKER);
  } finally {
    await state('booted', 'stop');
  }
});

test.serial('properties, aliases, public, expires_at and filename are honoured; metadata.yaml is rewritten as the reference does', async (t) => {
  const before = parse(readFileSync(path.join(volume('c1'), 'metadata.yaml'), 'utf8'));
  const op = await publish({
    source: { type: 'instance', name: 'c1' },
    compression_algorithm: 'gzip',
    properties: { os: 'custom', flavour: 'test' },
    public: true,
    expires_at: '2031-02-03T04:05:06Z',
    filename: 'c1-image.tar.gz',
    aliases: [{ name: 'pub-a', description: 'first' }, { name: 'pub-b' }],
    auto_update: true,
  });
  t.is(op.status, 'Success', op.err);
  const fp = op.metadata.fingerprint;
  const shown = (await d.request('GET', `/1.0/images/${fp}`)).json.metadata;
  // Given properties replace the source's (the reference lets API callers drop them this way).
  t.deepEqual(shown.properties, { flavour: 'test', os: 'custom' });
  t.is(shown.public, true);
  t.is(shown.expires_at, '2031-02-03T04:05:06Z');
  t.is(shown.filename, 'c1-image.tar.gz');
  t.is(shown.auto_update, false, 'published images have nothing to update from, as the reference keeps it');
  t.deepEqual(shown.aliases, [{ name: 'pub-a', description: 'first' }, { name: 'pub-b', description: '' }]);
  t.is((await d.request('GET', '/1.0/images/aliases/pub-b')).json.metadata.target, fp);

  const meta = parse(memberText(await exported(fp), 'metadata.yaml'));
  t.deepEqual(meta.properties, { os: 'custom', flavour: 'test' });
  t.is(meta.expiry_date, Date.parse('2031-02-03T04:05:06Z') / 1000);
  t.is(meta.creation_date, before.creation_date, 'creation_date is kept');
  t.deepEqual(meta.templates, before.templates, 'templates are kept');
  t.is(meta.architecture, 'x86_64');
  t.truthy(events('image-alias-created').find((e) => e.metadata.source === '/1.0/images/aliases/pub-a'));

  // An empty map drops every property.
  const bare = await publish({ source: { type: 'instance', name: 'c1' }, compression_algorithm: 'none', properties: {} });
  t.is(bare.status, 'Success', bare.err);
  t.deepEqual((await d.request('GET', `/1.0/images/${bare.metadata.fingerprint}`)).json.metadata.properties, {});
});

test.serial('the server default compression applies when the request names none', async (t) => {
  const set = (value: string) => d.request('PATCH', '/1.0', { config: { 'images.compression_algorithm': value } });
  t.is((await set('xz')).status, 200);
  try {
    const op = await publish({ source: { type: 'instance', name: 'c1' }, properties: { which: 'default-xz' } });
    t.is(op.status, 'Success', op.err);
    t.true(MAGIC.xz!(readFileSync(await exported(op.metadata.fingerprint))));
    t.true((await set('squashfs')).status === 200);
    const refused = await call('POST', '/1.0/images', { source: { type: 'instance', name: 'c1' } });
    t.is(refused.status, 400);
    t.regex(refused.json.error, /squashfs.*images\.compression_algorithm/);
  } finally {
    await set('');
  }
});

test.serial('publishing the same content twice fails as the reference does, naming the image', async (t) => {
  const body = { source: { type: 'instance', name: 'c1' }, compression_algorithm: 'gzip', properties: { twice: 'yes' } };
  const first = await publish(body);
  t.is(first.status, 'Success', first.err);
  const second = await publish(body);
  t.is(second.status, 'Failure');
  t.is(second.err, `The image already exists: ${first.metadata.fingerprint}`);
  t.is(second.metadata.fingerprint, first.metadata.fingerprint);
  const list = (await d.request('GET', '/1.0/images')).json.metadata as string[];
  t.is(list.filter((u) => u.endsWith(first.metadata.fingerprint)).length, 1);
});

test.serial('a running container is refused in the operation, as the reference answers; the instance stays usable', async (t) => {
  await create('crun');
  await state('crun', 'start');
  const before = (await d.request('GET', '/1.0/images')).json.metadata.length;
  for (const type of ['instance', 'container']) {
    const res = await call('POST', '/1.0/images', { source: { type, name: 'crun' } });
    t.is(res.status, 202);
    t.is(res.op.status, 'Failure');
    t.is(res.op.status_code, 400);
    t.is(res.op.err, 'Cannot export a running instance as an image');
  }
  t.is((await d.request('GET', '/1.0/images')).json.metadata.length, before, 'nothing was created');
  // The instance lock was given back: a stop goes through at once.
  await state('crun', 'stop');
  const op = await publish({ source: { type: 'instance', name: 'crun' }, compression_algorithm: 'none' });
  t.is(op.status, 'Success', op.err);
});

test.serial('bad requests: 404 for missing sources, 400 for bad fields, 409 for taken aliases; nothing is created', async (t) => {
  await d.request('POST', '/1.0/images/aliases', { name: 'taken', target: (await d.request('GET', '/1.0/images/aliases/bb')).json.metadata.target });
  const before = (await d.request('GET', '/1.0/images')).json.metadata.length;
  const cases: [unknown, number, RegExp][] = [
    [{ source: { type: 'instance', name: 'ghost' } }, 404, /not found/i],
    [{ source: { type: 'snapshot', name: 'ghost/s0' } }, 404, /not found/i],
    [{ source: { type: 'snapshot', name: 'c1/nope' } }, 404, /not found/i],
    [{ source: { type: 'virtual-machine', name: 'c1' } }, 404, /not found/i],
    [{ source: { type: 'instance', name: 'c1' }, compression_algorithm: 'foo' }, 400, /Invalid compression algorithm "foo"/],
    [{ source: { type: 'instance', name: 'c1' }, compression_algorithm: 'squashfs' }, 400, /squashfs/],
    [{ source: { type: 'instance', name: 'c1' }, compression_algorithm: 'gzip -99' }, 400, /level/],
    [{ source: { type: 'instance', name: 'c1' }, compression_algorithm: 'zstd -o /tmp/x' }, 400, /level/],
    [{ source: { type: 'instance', name: 'c1' }, compression_algorithm: 7 }, 400, /must be a string/],
    [{ source: { type: 'instance' } }, 400, /needs a "name"/],
    [{ source: { type: 'instance', name: 'c1' }, aliases: 'x' }, 400, /must be a list/],
    [{ source: { type: 'instance', name: 'c1' }, aliases: [{ name: 'has space' }] }, 400, /alias name/i],
    [{ source: { type: 'instance', name: 'c1' }, aliases: [{ name: 'taken' }] }, 409, /already exists/],
    [{ source: { type: 'instance', name: 'c1' }, aliases: [{ name: 'twin' }, { name: 'twin' }] }, 409, /already exists/],
    [{ source: { type: 'instance', name: 'c1' }, properties: { n: 1 } }, 400, /properties\.n/],
    [{ source: { type: 'instance', name: 'c1' }, expires_at: 'soon' }, 400, /expires_at/],
    [{ source: { type: 'instance', name: 'c1' }, public: 'yes' }, 400, /public/],
    [{ source: { type: 'teleport', name: 'c1' } }, 400, /Unknown image source type "teleport"/],
  ];
  for (const [body, status, message] of cases) {
    const res = await call('POST', '/1.0/images', body);
    t.is(res.status, status, JSON.stringify(body));
    t.is(res.json?.type, 'error', JSON.stringify(body));
    t.regex(res.json?.error ?? '', message, JSON.stringify(body));
  }
  // What the reference refuses only once the operation runs.
  for (const [source, err] of [[{ type: 'snapshot', name: 'c1' }, 'Not a snapshot'], [{ type: 'instance', name: 'c1/s0' }, 'This is a snapshot']] as const) {
    const res = await call('POST', '/1.0/images', { source });
    t.is(res.op?.status, 'Failure', JSON.stringify(source));
    t.is(res.op?.err, err);
  }
  t.is((await d.request('GET', '/1.0/images')).json.metadata.length, before);
  t.is((await d.request('GET', '/1.0/images/aliases/twin')).status, 404);
});

test.serial('a snapshot publishes what the instance held when it was taken', async (t) => {
  await create('csnap');
  await push('csnap', '/root/state.txt', 'at snapshot\n');
  const { op: snap } = await call('POST', '/1.0/instances/csnap/snapshots', { name: 's0' });
  t.is(snap?.status, 'Success', snap?.err);
  await push('csnap', '/root/state.txt', 'after snapshot\n');
  await push('csnap', '/root/later.txt', 'later\n');
  // A snapshot of a running instance is still fine: it does not change.
  await state('csnap', 'start');
  try {
    const op = await publish({ source: { type: 'snapshot', name: 'csnap/s0' }, compression_algorithm: 'gzip', aliases: [{ name: 'from-snap' }] });
    t.is(op.status, 'Success', op.err);
  } finally {
    await state('csnap', 'stop');
  }
  await create('fromsnap', { type: 'image', alias: 'from-snap' });
  t.is((await pull('fromsnap', '/root/state.txt')).body, 'at snapshot\n');
  t.is((await pull('fromsnap', '/root/later.txt')).status, 404);
});

test.serial('an instance without metadata.yaml gets one: architecture, creation date, its image.* keys as properties', async (t) => {
  await create('nometa');
  const edit = await call('PATCH', '/1.0/instances/nometa', { config: { 'image.os': 'Handmade', 'image.release': '7' } });
  t.is(edit.status, 200, edit.body);
  rmSync(path.join(volume('nometa'), 'metadata.yaml'));
  rmSync(path.join(volume('nometa'), 'templates'), { recursive: true, force: true });
  const started = Math.floor(Date.now() / 1000);
  const op = await publish({ source: { type: 'instance', name: 'nometa' }, compression_algorithm: 'none', expires_at: '2032-01-01T00:00:00Z' });
  t.is(op.status, 'Success', op.err);
  const shown = (await d.request('GET', `/1.0/images/${op.metadata.fingerprint}`)).json.metadata;
  t.like(shown.properties, { os: 'Handmade', release: '7' });
  t.is(shown.expires_at, '2032-01-01T00:00:00Z');
  const file = await exported(op.metadata.fingerprint);
  t.false(members(file).some((n) => n.startsWith('templates')));
  const meta = parse(memberText(file, 'metadata.yaml'));
  t.is(meta.architecture, 'x86_64');
  t.true(meta.creation_date >= started && meta.creation_date <= started + 60);
  t.is(meta.expiry_date, Date.parse('2032-01-01T00:00:00Z') / 1000);
  t.like(meta.properties, { os: 'Handmade', release: '7' });
});

test.serial('the operation shows pack progress as the reference names it', async (t) => {
  await create('cbig');
  // Random data keeps bzip2 busy for a few seconds.
  await push('cbig', '/root/big.bin', randomBytes(24 << 20));
  const res = await d.request('POST', '/1.0/images', { source: { type: 'instance', name: 'cbig' }, compression_algorithm: 'bzip2' });
  t.is(res.status, 202);
  let progress: any;
  await waitFor(async () => {
    const op = (await d.request('GET', res.json.operation)).json.metadata;
    if (op.metadata?.create_image_from_container_pack_progress) progress = op.metadata;
    return Boolean(progress) || op.status !== 'Running';
  }, 60000, 'pack progress');
  t.truthy(progress, 'progress was shown while packing');
  t.regex(progress.create_image_from_container_pack_progress, /^Image pack: (\d+% \(|\d+(\.\d+)?[kMG]?B \()[\d.]+[kMGT]?B\/s\)$/);
  t.is(progress.progress.stage, 'create_image_from_container_pack');
  t.regex(progress.progress.speed, /^\d+$/);
  const done = (await d.request('GET', `${res.json.operation}/wait?timeout=120`)).json.metadata;
  t.is(done.status, 'Success', done.err);
  t.deepEqual(Object.keys(done.metadata).sort(), ['fingerprint', 'size']);
});

test('progress text: decimal units, percentage capped until the end', (t) => {
  t.is(byteSize(512), '512B');
  t.is(byteSize(7528408), '7.53MB');
  t.is(byteSize(1_500), '1.50kB');
  t.is(byteSize(1000), '1.00kB');
  const shown: Record<string, unknown>[] = [];
  const op = { id: 'x', signal: new AbortController().signal, updateMetadata: (m: Record<string, unknown>) => shown.push(m) };
  const realNow = Date.now;
  let now = 1_000_000;
  Date.now = () => now;
  try {
    const reporter = progressReporter(op, 'stage', 'Label', 1000);
    now += 500;
    reporter.update(10);
    t.is(shown.length, 1, 'the first update is shown at once');
    now += 400;
    reporter.update(20);
    t.is(shown.length, 1, 'then at most once a second');
    now += 1100;
    reporter.update(2000);
    t.deepEqual(shown[1], { stage_progress: 'Label: 99% (1.00kB/s)', progress: { stage: 'stage', speed: '1000', percent: '99' } });
    reporter.clear();
    t.deepEqual(JSON.parse(JSON.stringify(shown[2])), {});
  } finally {
    Date.now = realNow;
  }
});

test('packImage: the fingerprint is the file\'s sha256; tar, compressor and write failures are named', async (t) => {
  const tools = createHostTools(bunyan.createLogger({ name: 'pack-test', level: 'fatal' }));
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-pack-test-'));
  try {
    mkdirSync(path.join(dir, 'src/rootfs/etc'), { recursive: true });
    writeFileSync(path.join(dir, 'src/rootfs/etc/hello'), 'hello\n');
    writeFileSync(path.join(dir, 'src/metadata.yaml'), 'architecture: x86_64\ncreation_date: 1\n');
    const base = { metadataDir: path.join(dir, 'src'), dir: path.join(dir, 'src'), members: ['rootfs'] };
    let seen = 0;
    const out = path.join(dir, 'ok.tar.gz');
    const packed = await packImage(tools, { ...base, compressor: { compression: 'gzip', command: 'gzip', args: ['-c', '-n'] }, out, onProgress: (n) => (seen = n) });
    t.is(packed.fingerprint, sha256(out));
    t.is(packed.size, readFileSync(out).length);
    t.true(seen >= 3 * 512, 'tar bytes were counted');
    t.deepEqual(execFileSync('tar', ['-tzf', out], { encoding: 'utf8' }).split('\n').filter(Boolean), ['metadata.yaml', 'rootfs/', 'rootfs/etc/', 'rootfs/etc/hello']);

    const squeezeFails = packImage(tools, { ...base, compressor: { compression: 'gzip', command: 'sh', args: ['-c', 'echo boom >&2; exit 3'] }, out: path.join(dir, 'a') });
    await t.throwsAsync(squeezeFails, { message: 'Packing the image failed: sh: boom' });
    const tarFails = packImage(tools, { ...base, members: ['missing'], compressor: { compression: 'none', args: [] }, out: path.join(dir, 'b') });
    await t.throwsAsync(tarFails, { message: /^Packing the image failed: tar: missing: Cannot stat/ });
    const writeFails = packImage(tools, { ...base, compressor: { compression: 'none', args: [] }, out: path.join(dir, 'nowhere/c') });
    await t.throwsAsync(writeFails, { message: /^Packing the image failed: ENOENT/ });
    const missingTool = packImage(tools, { ...base, compressor: { compression: 'zstd', command: 'no-such-zstd', args: [] }, out: path.join(dir, 'd') });
    await t.throwsAsync(missingTool, { message: 'Packing the image needs "no-such-zstd" on this host, and it is not installed' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

lxcTest('e2e: lxc publish, then lxc launch of the alias holds the file pushed before', async (t) => {
  const run = async (...args: string[]) => {
    const r = await lxc(d.socket, ...args);
    t.is(r.status, 0, `lxc ${args.join(' ')}: ${r.stderr}`);
    return r;
  };
  const marker = path.join(scratch, 'e2e.txt');
  writeFileSync(marker, 'through the client\n');
  await run('init', 'bb', 'e1');
  await run('file', 'push', marker, 'e1/root/e2e.txt');
  const published = await run('publish', 'e1', '--alias', 'pub', 'flavour=e2e');
  t.regex(published.stdout, /fingerprint: [0-9a-f]{64}/);
  const info = await run('image', 'info', 'pub');
  t.regex(info.stdout, /flavour: e2e/);
  await run('launch', 'pub', 'e2');
  try {
    const cat = await run('exec', 'e2', '--', 'cat', '/root/e2e.txt');
    t.is(cat.stdout, 'through the client\n');
  } finally {
    await lxc(d.socket, 'stop', '--force', 'e2');
  }
  // The client refuses a running instance itself; with --force it stops and restarts it.
  await run('start', 'e1');
  const forced = await run('publish', 'e1', '--alias', 'pub-forced', '--force', '--compression', 'xz');
  t.regex(forced.stdout, /fingerprint: [0-9a-f]{64}/);
  t.regex((await run('list', 'e1', '--format', 'csv', '-c', 's')).stdout, /RUNNING/);
  await lxc(d.socket, 'stop', '--force', 'e1');
});
