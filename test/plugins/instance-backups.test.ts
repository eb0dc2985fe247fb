/**
 * Instance backups through a real daemon (edge set): create, list, show, rename, delete and export
 * with every compression, round trips with snapshots and name overrides, the checks an uploaded
 * backup goes through (each refusal leaves nothing behind), expiry, instances taking their backups
 * along on rename and delete, and kill -9 in the middle of a backup and of an import.
 */
import test, { type ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, linkSync, lchownSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { parse } from 'yaml';
import { collect, killContainers, startDaemon, startWithPool, stopDaemons, waitFor, type Daemon, type HttpResult } from '../helpers/daemon.js';
import { callAndWait, importImage } from '../helpers/api.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { parseShift, unshiftTree } from '../../sdk/lib/storage/index.js';

let d: Daemon;
let image: BusyboxImage;
let work: string;
let events: any[];

const call = (method: string, url: string, body?: unknown, daemon = d) => callAndWait(daemon, method, url, body);
const poolDir = (daemon = d) => path.join(daemon.dir, 'storage-pools', 'default');
const volumes = (daemon = d) => readdirSync(path.join(poolDir(daemon), 'containers')).sort();

function ok(t: ExecutionContext, res: { status: number; op?: any; json: any }, what: string): void {
  t.true(res.status === 200 || res.status === 202, `${what}: ${res.status} ${JSON.stringify(res.json)}`);
  if (res.op) t.is(res.op.status, 'Success', `${what}: ${res.op.err}`);
}

async function exportBackup(instance: string, backup: string, daemon = d): Promise<HttpResult & { raw: Buffer }> {
  const res = await new Promise<HttpResult & { raw: Buffer }>((resolve, reject) => {
    import('node:http').then(({ default: http }) => {
      const req = http.request({ socketPath: daemon.socket, method: 'GET', path: `/1.0/instances/${instance}/backups/${encodeURIComponent(backup)}/export` }, (r) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => {
          const raw = Buffer.concat(chunks);
          let json: unknown;
          try { json = JSON.parse(raw.toString('utf8')); } catch { /* binary */ }
          resolve({ status: r.statusCode ?? 0, headers: r.headers, body: '', json, raw });
        });
      });
      req.on('error', reject);
      req.end();
    }, reject);
  });
  return res;
}

function importBackup(body: Buffer, headers: Record<string, string> = {}, daemon = d) {
  return callAndWait(daemon, 'POST', '/1.0/instances', body, { 'content-type': 'application/octet-stream', ...headers });
}

function push(instance: string, file: string, content: string, daemon = d) {
  return daemon.request('POST', `/1.0/instances/${instance}/files?path=${encodeURIComponent(file)}`, Buffer.from(content), { 'content-type': 'application/octet-stream' });
}

async function pull(instance: string, file: string, daemon = d): Promise<string> {
  const res = await daemon.request('GET', `/1.0/instances/${instance}/files?path=${encodeURIComponent(file)}`);
  return res.body;
}

/** Member names and owners of a tarball, through GNU tar (it recognises the compression itself). */
function listing(file: string): { names: string[]; verbose: string[] } {
  const names = execFileSync('tar', ['-t', '-f', file], { encoding: 'utf8', maxBuffer: 64 << 20 }).split('\n').filter(Boolean);
  // Without --numeric-owner here, tar shows names when the archive carries them.
  const verbose = execFileSync('tar', ['-tv', '-f', file], { encoding: 'utf8', maxBuffer: 64 << 20 }).split('\n').filter(Boolean);
  return { names, verbose };
}

function memberText(file: string, member: string): string {
  return execFileSync('tar', ['-x', '-O', '-f', file, member], { encoding: 'utf8' });
}

/** Nothing of a refused import may remain: no record, no volume, no work area. */
async function assertNothingLeft(t: ExecutionContext, name: string, daemon = d): Promise<void> {
  t.is((await daemon.request('GET', `/1.0/instances/${name}`)).status, 404, `no ${name} record`);
  t.false(volumes(daemon).includes(name), `no ${name} volume`);
  t.false(existsSync(path.join(poolDir(daemon), 'containers-snapshots', name)), `no ${name} snapshots`);
  const backupsDir = path.join(daemon.dir, 'backups');
  const scratch = existsSync(backupsDir) ? readdirSync(backupsDir).filter((e) => e.startsWith('.import-') || e.startsWith('.create-')) : [];
  t.deepEqual(scratch, [], 'no work area left');
}

// --- A minimal ustar writer, to craft archives no tar tool would write. -----------------------

interface Member {
  name: string;
  /** '0' file (default), '1' hard link, '2' symlink, '3' char device, '5' directory. */
  type?: string;
  content?: string | Buffer;
  linkname?: string;
  mode?: number;
  dev?: [number, number];
}

function header(m: Member, size: number): Buffer {
  const h = Buffer.alloc(512);
  const text = (s: string, off: number, len: number) => {
    const b = Buffer.from(s, 'utf8');
    if (b.length > len) throw new Error(`field too long: ${s}`);
    b.copy(h, off);
  };
  const octal = (n: number, off: number, len: number) => text(`${n.toString(8).padStart(len - 1, '0')}\0`, off, len);
  const type = m.type ?? '0';
  text(m.name, 0, 100);
  octal(m.mode ?? (type === '5' ? 0o755 : 0o644), 100, 8);
  octal(0, 108, 8);
  octal(0, 116, 8);
  octal(size, 124, 12);
  octal(1700000000, 136, 12);
  h.fill(0x20, 148, 156);
  text(type, 156, 1);
  text(m.linkname ?? '', 157, 100);
  text('ustar\0', 257, 6);
  text('00', 263, 2);
  octal(m.dev?.[0] ?? 0, 329, 8);
  octal(m.dev?.[1] ?? 0, 337, 8);
  let sum = 0;
  for (const byte of h) sum += byte;
  text(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
  return h;
}

function tarball(members: Member[]): Buffer {
  const parts: Buffer[] = [];
  for (const m of members) {
    const content = m.type && m.type !== '0' ? Buffer.alloc(0) : Buffer.from(m.content ?? '');
    parts.push(header(m, content.length), content, Buffer.alloc((512 - (content.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

function indexYaml(name: string, extra: { profiles?: string[]; snapshots?: string[]; optimized?: boolean } = {}): string {
  return [
    `name: ${name}`,
    'backend: dir',
    'pool: default',
    ...(extra.snapshots ? ['snapshots:', ...extra.snapshots.map((s) => `- ${s}`)] : []),
    `optimized: ${extra.optimized ?? false}`,
    'optimized_header: false',
    'type: container',
    'config:',
    '  container:',
    '    architecture: x86_64',
    '    config:',
    '      user.origin: crafted',
    '    devices: {}',
    '    ephemeral: false',
    '    profiles:',
    ...(extra.profiles ?? ['default']).map((p) => `    - ${p}`),
    '    stateful: false',
    '    description: crafted backup',
    '    created_at: 2024-01-02T03:04:05Z',
    `    name: ${name}`,
    '',
  ].join('\n');
}

/** A small valid backup; `extra` members are appended after the instance's own. */
function crafted(name: string, extra: Member[] = [], index = indexYaml(name)): Buffer {
  return gzipSync(tarball([
    { name: 'backup/index.yaml', content: index },
    { name: 'backup/container', type: '5', mode: 0o711 },
    { name: 'backup/container/metadata.yaml', content: 'architecture: x86_64\ncreation_date: 1700000000\n' },
    { name: 'backup/container/rootfs', type: '5' },
    { name: 'backup/container/rootfs/etc', type: '5' },
    { name: 'backup/container/rootfs/etc/hello', content: 'hello from the archive\n' },
    ...extra,
  ]));
}

// ---------------------------------------------------------------------------------------------

test.before(async () => {
  image = buildBusyboxImage('gzip');
  work = mkdtempSync(path.join(tmpdir(), 'corral-backups-'));
  d = await startWithPool();
  await importImage(d, image.unified, 'bb');
  const ws = await d.websocket('/1.0/events?type=lifecycle');
  events = collect(ws);
  const created = await call('POST', '/1.0/instances', { name: 'src', source: { type: 'image', alias: 'bb' } });
  if (created.op?.status !== 'Success') throw new Error(`creating the source instance failed: ${created.op?.err ?? created.body}`);
  await push('src', '/root/data', 'version two\n');
});

test.after.always(async () => {
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

const MAGIC: Record<string, (b: Buffer) => boolean> = {
  gzip: (b) => b[0] === 0x1f && b[1] === 0x8b,
  bzip2: (b) => b.subarray(0, 3).toString('latin1') === 'BZh',
  xz: (b) => b.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00])),
  zstd: (b) => b.subarray(0, 4).equals(Buffer.from([0x28, 0xb5, 0x2f, 0xfd])),
  none: (b) => b.subarray(257, 262).toString('latin1') === 'ustar',
};

for (const algorithm of ['gzip', 'bzip2', 'xz', 'zstd', 'none']) {
  test.serial(`create, list, show, export, rename and delete a ${algorithm} backup (backup_compression_algorithm)`, async (t) => {
    const name = `b-${algorithm}`;
    const created = await call('POST', '/1.0/instances/src/backups', { name, compression_algorithm: algorithm });
    ok(t, created, 'create');
    t.is(created.op.description, 'Backing up instance');
    t.deepEqual(created.op.resources.backups, [`/1.0/backups/${name}`], 'named as lxc export reads it');

    const list = (await call('GET', '/1.0/instances/src/backups')).json.metadata;
    t.true(list.includes(`/1.0/instances/src/backups/${name}`));
    t.true((await call('GET', '/1.0/containers/src/backups')).json.metadata.includes(`/1.0/instances/src/backups/${name}`), 'the alias lists /1.0/instances URLs, as the reference does');
    const full = (await call('GET', '/1.0/instances/src/backups?recursion=1')).json.metadata.find((b: any) => b.name === name);
    t.deepEqual(Object.keys(full).sort(), ['container_only', 'created_at', 'expires_at', 'instance_only', 'name', 'optimized_storage']);
    const shown = (await call('GET', `/1.0/instances/src/backups/${name}`)).json.metadata;
    t.deepEqual(shown, full);
    t.is(shown.expires_at, '0001-01-01T00:00:00Z');
    t.false(shown.instance_only);
    t.regex(shown.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);

    const exported = await exportBackup('src', name);
    t.is(exported.status, 200);
    t.is(exported.headers['content-type'], 'application/octet-stream');
    t.is(Number(exported.headers['content-length']), exported.raw.length);
    t.true(MAGIC[algorithm]!(exported.raw), `${algorithm} magic`);
    const file = path.join(work, `${name}.tar`);
    writeFileSync(file, exported.raw);
    const { names, verbose } = listing(file);
    t.is(names[0], 'backup/index.yaml', 'index first, as the reference writes it');
    t.false(names.some((n) => n.startsWith('./') || n.startsWith('/')), 'no ./ or absolute names');
    for (const member of ['backup/container/', 'backup/container/backup.yaml', 'backup/container/metadata.yaml', 'backup/container/rootfs/bin/busybox', 'backup/container/rootfs/root/data']) {
      t.true(names.includes(member), member);
    }
    t.false(names.some((n) => n.startsWith('backup/snapshots')));
    t.true(verbose.every((line) => /^\S+ \d+\/\d+ /.test(line)), 'numeric owners');
    const index = parse(memberText(file, 'backup/index.yaml'));
    t.like(index, { name: 'src', backend: 'dir', pool: 'default', optimized: false, optimized_header: false, type: 'container' });
    t.is(index.config.container.name, 'src');
    t.is(index.config.container.expanded_devices.root.pool, 'default');
    t.is(index.config.pool.driver, 'dir');
    t.is(index.config.profiles[0].name, 'default');
    t.is(index.config.volume.name, 'src');
    const inner = parse(memberText(file, 'backup/container/backup.yaml'));
    t.deepEqual(inner, index.config, 'the instance directory carries the same config');

    const renamed = `${name}-renamed`;
    ok(t, await call('POST', `/1.0/instances/src/backups/${name}`, { name: renamed }), 'rename');
    t.is((await call('GET', `/1.0/instances/src/backups/${name}`)).status, 404);
    t.is((await call('GET', `/1.0/instances/src/backups/${renamed}`)).json.metadata.name, renamed);
    const again = await exportBackup('src', renamed);
    t.true(again.raw.equals(exported.raw), 'the renamed backup serves the same file');
    ok(t, await call('DELETE', `/1.0/instances/src/backups/${renamed}`), 'delete');
    t.is((await call('GET', `/1.0/instances/src/backups/${renamed}`)).status, 404);
    t.is((await exportBackup('src', renamed)).status, 404);
    t.false(existsSync(path.join(d.dir, 'backups', 'instances', 'src', renamed)));
    t.false(existsSync(path.join(d.dir, 'backups', 'instances', 'src', name)));

    await waitFor(() => events.some((e) => e.metadata.action === 'instance-backup-deleted' && e.metadata.source === `/1.0/instances/src/backups/${renamed}`), 5000, 'delete event');
    const actions = events.filter((e) => e.metadata.source?.startsWith('/1.0/instances/src/backups/b-' + algorithm)).map((e) => e.metadata);
    t.like(actions.find((a) => a.action === 'instance-backup-created'), { source: `/1.0/instances/src/backups/${name}` });
    t.like(actions.find((a) => a.action === 'instance-backup-renamed'), { source: `/1.0/instances/src/backups/${renamed}`, context: { old_name: `src/${name}` } });
  });
}

test.serial('default names, duplicates, bad input and the server default compression (backup_compression)', async (t) => {
  ok(t, await call('POST', '/1.0/instances/src/backups', {}), 'first unnamed');
  ok(t, await call('POST', '/1.0/instances/src/backups', { name: '' }), 'second unnamed');
  const names = (await call('GET', '/1.0/instances/src/backups?recursion=1')).json.metadata.map((b: any) => b.name);
  t.true(names.includes('backup0') && names.includes('backup1'), names.join(','));
  t.true(MAGIC.gzip!((await exportBackup('src', 'backup0')).raw), 'gzip by default');

  const cases: [string, unknown, number, RegExp][] = [
    ['/1.0/instances/src/backups', { name: 'backup0' }, 409, /already exists/],
    ['/1.0/instances/src/backups', { name: 'a/b' }, 400, /slash/],
    ['/1.0/instances/src/backups', { name: '..' }, 400, /Invalid backup name/],
    ['/1.0/instances/src/backups', { name: 'x', compression_algorithm: 'lz5' }, 400, /compression algorithm "lz5"/],
    ['/1.0/instances/src/backups', { name: 'x', expires_at: 'tomorrow' }, 400, /expires_at/],
    ['/1.0/instances/src/backups', { name: 'x', instance_only: 'yes' }, 400, /instance_only/],
    ['/1.0/instances/src/backups', { name: 7 }, 400, /name/],
    ['/1.0/instances/nosuch/backups', { name: 'x' }, 404, /not found/i],
    ['/1.0/instances/src/backups/backup0', { name: 'backup1' }, 409, /already exists/],
    ['/1.0/instances/src/backups/backup0', { name: 'x/y' }, 400, /slash/],
    ['/1.0/instances/src/backups/backup0', {}, 400, /name/],
    ['/1.0/instances/src/backups/nosuch', { name: 'z' }, 404, /not found/i],
  ];
  for (const [url, body, status, message] of cases) {
    const res = await d.request('POST', url, body);
    t.is(res.status, status, `${url} ${JSON.stringify(body)}: ${res.body}`);
    t.is(res.json.type, 'error');
    t.regex(res.json.error, message);
  }
  t.is((await d.request('DELETE', '/1.0/instances/src/backups/nosuch')).status, 404);
  t.is((await d.request('GET', '/1.0/instances/src/backups/nosuch/export')).status, 404);
  const listed = (await call('GET', '/1.0/instances/src/backups?recursion=1')).json.metadata.map((b: any) => b.name).sort();
  t.deepEqual(listed, ['backup0', 'backup1'], 'refusals created nothing');

  // optimized_storage is accepted and ignored on dir pools, as the reference does.
  ok(t, await call('POST', '/1.0/instances/src/backups', { name: 'opt', optimized_storage: true, expires_at: '2099-01-02T03:04:05Z' }), 'optimized');
  const opt = (await call('GET', '/1.0/instances/src/backups/opt')).json.metadata;
  t.false(opt.optimized_storage);
  t.is(opt.expires_at, '2099-01-02T03:04:05Z');

  t.is((await d.request('PATCH', '/1.0', { config: { 'backups.compression_algorithm': 'lz4' } })).status, 400);
  ok(t, await d.request('PATCH', '/1.0', { config: { 'backups.compression_algorithm': 'bzip2' } }), 'server key');
  ok(t, await call('POST', '/1.0/instances/src/backups', { name: 'by-key' }), 'create with the server default');
  t.true(MAGIC.bzip2!((await exportBackup('src', 'by-key')).raw), 'the server key chose bzip2');
  ok(t, await d.request('PATCH', '/1.0', { config: { 'backups.compression_algorithm': '' } }), 'unset');

  const full = (await call('GET', '/1.0/instances/src?recursion=2')).json.metadata;
  t.true(full.backups.some((b: any) => b.name === 'by-key'), 'recursion=2 shows the backups');
  for (const name of ['backup0', 'backup1', 'opt', 'by-key']) ok(t, await call('DELETE', `/1.0/instances/src/backups/${name}`), `delete ${name}`);
  t.is((await call('GET', '/1.0/instances/src?recursion=2')).json.metadata.backups, null);
});

test.serial('export then import restores files, config and snapshots; X-LXD-name renames (backup_override_name)', async (t) => {
  ok(t, await call('POST', '/1.0/instances', { name: 'rt', source: { type: 'image', alias: 'bb' }, config: { 'user.note': 'kept' } }), 'create');
  await push('rt', '/root/data', 'version one\n');
  const snap = await call('POST', '/1.0/instances/rt/snapshots', { name: 's0' });
  ok(t, snap, 'snapshot');
  await push('rt', '/root/data', 'version two\n');
  const original = (await call('GET', '/1.0/instances/rt')).json.metadata;

  ok(t, await call('POST', '/1.0/instances/rt/backups', { name: 'full' }), 'full backup');
  ok(t, await call('POST', '/1.0/instances/rt/backups', { name: 'only', instance_only: true }), 'instance-only backup');
  const only = (await call('GET', '/1.0/instances/rt/backups/only')).json.metadata;
  t.true(only.instance_only && only.container_only);
  const fullTar = (await exportBackup('rt', 'full')).raw;
  const onlyTar = (await exportBackup('rt', 'only')).raw;
  writeFileSync(path.join(work, 'full.tar.gz'), fullTar);
  writeFileSync(path.join(work, 'only.tar.gz'), onlyTar);
  const fullNames = listing(path.join(work, 'full.tar.gz')).names;
  t.true(fullNames.includes('backup/snapshots/s0/rootfs/root/data'));
  t.true(fullNames.includes('backup/snapshots/s0/backup.yaml'));
  t.true(fullNames.indexOf('backup/snapshots/s0/') < fullNames.indexOf('backup/container/'), 'snapshots before the instance, as the reference');
  t.deepEqual(parse(memberText(path.join(work, 'full.tar.gz'), 'backup/index.yaml')).snapshots, ['s0']);
  t.false(listing(path.join(work, 'only.tar.gz')).names.some((n) => n.startsWith('backup/snapshots')));

  // The instance goes, and its backups with it.
  ok(t, await call('DELETE', '/1.0/instances/rt'), 'delete the original');
  t.false(existsSync(path.join(d.dir, 'backups', 'instances', 'rt')));

  const restored = await importBackup(fullTar);
  ok(t, restored, 'import');
  t.is(restored.op.description, 'Restoring backup');
  const back = (await call('GET', '/1.0/instances/rt')).json.metadata;
  t.is(back.config['user.note'], 'kept');
  t.is(back.config['volatile.uuid'], original.config['volatile.uuid']);
  t.is(back.created_at, original.created_at, 'creation time kept');
  t.deepEqual(back.profiles, ['default']);
  t.is(await pull('rt', '/root/data'), 'version two\n');
  const snapshots = (await call('GET', '/1.0/instances/rt/snapshots?recursion=1')).json.metadata;
  t.deepEqual(snapshots.map((s: any) => s.name), ['s0']);
  t.is(readFileSync(path.join(poolDir(), 'containers-snapshots', 'rt', 's0', 'rootfs', 'root', 'data'), 'utf8'), 'version one\n');
  t.false(existsSync(path.join(poolDir(), 'containers', 'rt', 'backup.yaml')), 'the archived backup.yaml is not kept in the volume');
  await waitFor(() => events.some((e) => e.metadata.action === 'instance-created' && e.metadata.source === '/1.0/instances/rt'), 5000, 'created event');

  t.is((await importBackup(fullTar)).status, 409, 'the name is taken');
  const renamed = await importBackup(onlyTar, { 'X-LXD-name': 'rt2' });
  ok(t, renamed, 'import under another name');
  t.deepEqual((await call('GET', '/1.0/instances/rt2/snapshots')).json.metadata, [], 'instance-only: no snapshots');
  ok(t, await call('PUT', '/1.0/instances/rt2/state', { action: 'start' }), 'the restored instance starts');
  const exec = await call('POST', '/1.0/instances/rt2/exec', { command: ['cat', '/root/data'], 'record-output': true, 'wait-for-websocket': false, interactive: false });
  t.is(exec.op.metadata.return, 0);
  t.is((await d.request('GET', exec.op.metadata.output['1'])).body, 'version two\n');
  ok(t, await call('PUT', '/1.0/instances/rt2/state', { action: 'stop', force: true }), 'stop');
  t.is((await importBackup(onlyTar, { 'X-LXD-name': 'bad/name' })).status, 400);

  // Renaming an instance takes its backups along.
  ok(t, await call('POST', '/1.0/instances/rt2/backups', { name: 'travels' }), 'backup of rt2');
  const before = (await exportBackup('rt2', 'travels')).raw;
  ok(t, await call('POST', '/1.0/instances/rt2', { name: 'rt3' }), 'rename the instance');
  t.deepEqual((await call('GET', '/1.0/instances/rt3/backups')).json.metadata, ['/1.0/instances/rt3/backups/travels']);
  t.true((await exportBackup('rt3', 'travels')).raw.equals(before));
  t.false(existsSync(path.join(d.dir, 'backups', 'instances', 'rt2')));
  for (const name of ['rt', 'rt3']) ok(t, await call('DELETE', `/1.0/instances/${name}`), `delete ${name}`);
  t.deepEqual(readdirSync(path.join(d.dir, 'backups', 'instances')).filter((e) => e.startsWith('rt')), []);
});

test.serial('X-LXD-pool must name an existing pool (container_backup_override_pool); a missing archive pool falls back to the default profile', async (t) => {
  const backup = crafted('pooled');
  const res = await importBackup(backup, { 'X-LXD-pool': 'nopool' });
  t.is(res.status, 404);
  t.regex(res.json.error, /Storage pool "nopool" not found/);
  await assertNothingLeft(t, 'pooled');

  const elsewhere = crafted('pooled', [], indexYaml('pooled').replace('pool: default', 'pool: gone'));
  ok(t, await importBackup(elsewhere), 'import from an unknown pool');
  const info = (await call('GET', '/1.0/instances/pooled')).json.metadata;
  t.is(info.expanded_devices.root.pool, 'default');
  ok(t, await call('DELETE', '/1.0/instances/pooled'), 'delete');

  const explicit = await importBackup(backup, { 'X-LXD-pool': 'default', 'X-LXD-name': 'pooled2' });
  ok(t, explicit, 'import into a named pool');
  ok(t, await call('DELETE', '/1.0/instances/pooled2'), 'delete');

  // Into another pool: the root disk follows (here it came from the default profile, so the instance gets its own).
  const source = mkdtempSync(path.join(tmpdir(), 'corral-bk-pool-'));
  rmSync(source, { recursive: true });
  try {
    t.is((await d.request('POST', '/1.0/storage-pools', { name: 'p2', driver: 'dir', config: { source } })).status, 200);
    ok(t, await importBackup(backup, { 'X-LXD-pool': 'p2', 'X-LXD-name': 'pooled3' }), 'import into p2');
    const moved = (await call('GET', '/1.0/instances/pooled3')).json.metadata;
    t.is(moved.expanded_devices.root.pool, 'p2');
    t.is(moved.devices.root.pool, 'p2');
    t.true(existsSync(path.join(source, 'containers', 'pooled3', 'rootfs', 'etc', 'hello')));
    t.false(volumes().includes('pooled3'));
    ok(t, await call('DELETE', '/1.0/instances/pooled3'), 'delete');
    t.is((await d.request('DELETE', '/1.0/storage-pools/p2')).status, 200);
  } finally {
    rmSync(source, { recursive: true, force: true });
  }
});

test.serial('a crafted archive with hard links, device nodes and symlinks inside the tree imports as it is', async (t) => {
  const backup = crafted('crafted', [
    { name: 'backup/container/rootfs/etc/hello2', type: '1', linkname: 'backup/container/rootfs/etc/hello' },
    { name: 'backup/container/rootfs/dev', type: '5' },
    { name: 'backup/container/rootfs/dev/null', type: '3', mode: 0o666, dev: [1, 3] },
    { name: 'backup/container/rootfs/etc/link', type: '2', linkname: '/etc/hello' },
    { name: 'backup/container/rootfs/etc/up', type: '2', linkname: '../../../../../../etc/passwd' },
  ]);
  ok(t, await importBackup(backup), 'import');
  const rootfs = path.join(poolDir(), 'containers', 'crafted', 'rootfs');
  t.is(readFileSync(path.join(rootfs, 'etc/hello'), 'utf8'), 'hello from the archive\n');
  t.is(statSync(path.join(rootfs, 'etc/hello')).ino, statSync(path.join(rootfs, 'etc/hello2')).ino, 'hard link kept');
  t.true(lstatSync(path.join(rootfs, 'dev/null')).isCharacterDevice());
  t.true(lstatSync(path.join(rootfs, 'etc/up')).isSymbolicLink(), 'symlinks are stored, never followed');
  const info = (await call('GET', '/1.0/instances/crafted')).json.metadata;
  t.is(info.description, 'crafted backup');
  t.is(info.created_at, '2024-01-02T03:04:05Z');
  t.is(info.config['user.origin'], 'crafted');
  ok(t, await call('DELETE', '/1.0/instances/crafted'), 'delete');
});

test.serial('bad archives are refused with 400 and leave nothing behind', async (t) => {
  const escape = mkdtempSync(path.join(tmpdir(), 'esc-'));
  const victim = path.join(escape, 'victim');
  writeFileSync(victim, 'untouched\n');
  const valid = crafted('evil');
  const plain = gunzipToTar(valid);
  const cases: [string, Buffer, RegExp][] = [
    ['empty body', Buffer.alloc(0), /empty/],
    ['not an archive', Buffer.from('this is not a tarball at all, just text '.repeat(40)), /not a tar archive/],
    ['truncated gzip', valid.subarray(0, Math.floor(valid.length / 2)), /damaged or truncated/],
    ['truncated tar', plain.subarray(0, 1700), /truncated/],
    ['no index', gzipSync(tarball([{ name: 'backup/container', type: '5' }, { name: 'backup/container/rootfs', type: '5' }])), /index\.yaml is missing/],
    ['index not YAML', crafted('evil', [], 'name: [unclosed\n  - x: {'), /not valid YAML/],
    ['index without a name', crafted('evil', [], 'backend: dir\npool: default\n'), /no instance "name"/],
    ['optimized format', crafted('evil', [], indexYaml('evil', { optimized: true })), /optimized/],
    ['snapshot listed but absent', crafted('evil', [], indexYaml('evil', { snapshots: ['s0'] })), /no backup\/snapshots\/s0/],
    ['missing profile', crafted('evil', [], indexYaml('evil', { profiles: ['default', 'nosuchprofile'] })), /nosuchprofile/],
    ['../ member', crafted('evil', [{ name: `backup/container/../../../../../../..${escape}/dotdot`, content: 'x' }]), /contains "\.\."/],
    ['absolute member', crafted('evil', [{ name: `${escape}/absolute`, content: 'x' }]), /absolute path/],
    ['member outside backup/', crafted('evil', [{ name: 'elsewhere/file', content: 'x' }]), /outside "backup\/"/],
    ['unexpected member', crafted('evil', [{ name: 'backup/extra.bin', content: 'x' }]), /unexpected member/],
    ['member through a symlink', crafted('evil', [
      { name: 'backup/container/rootfs/jump', type: '2', linkname: escape },
      { name: 'backup/container/rootfs/jump/through', content: 'x' },
    ]), /below the symlink/],
    ['symlink replaced', crafted('evil', [
      { name: 'backup/container/rootfs/jump', type: '2', linkname: escape },
      { name: 'backup/container/rootfs/jump', type: '5' },
    ]), /replaces a symlink/],
    ['hard link to an absolute path', crafted('evil', [{ name: 'backup/container/rootfs/hl', type: '1', linkname: victim }]), /absolute path/],
    ['hard link with ..', crafted('evil', [{ name: 'backup/container/rootfs/hl', type: '1', linkname: `backup/container/../../../../../..${victim}` }]), /contains "\.\."/],
    ['hard link through a symlink', crafted('evil', [
      { name: 'backup/container/rootfs/jump', type: '2', linkname: escape },
      { name: 'backup/container/rootfs/hl', type: '1', linkname: 'backup/container/rootfs/jump/victim' },
    ]), /below the symlink/],
    ['hard link to a member not archived', crafted('evil', [{ name: 'backup/container/rootfs/hl', type: '1', linkname: 'backup/container/rootfs/later' }]), /not a file archived before it/],
    ['device node outside a rootfs', crafted('evil', [{ name: 'backup/container/null', type: '3', dev: [1, 3] }]), /outside a root filesystem/],
    ['a virtual machine in the index, a container\'s parts in the archive', crafted('evil', [], indexYaml('evil').replace('type: container', 'type: virtual-machine')), /holds the parts of a container/],
    ['a virtual machine without its disk', gzipSync(tarball([
      { name: 'backup/index.yaml', content: indexYaml('evil').replace('type: container', 'type: virtual-machine') },
      { name: 'backup/virtual-machine', type: '5' },
      { name: 'backup/virtual-machine/metadata.yaml', content: 'architecture: x86_64\n' },
    ])), /no backup\/virtual-machine\.img/],
    ['a container\'s and a virtual machine\'s parts mixed', crafted('evil', [{ name: 'backup/virtual-machine.img', content: 'x' }]), /mixes a container/],
    ['an optimized part of a virtual machine', crafted('evil', [{ name: 'backup/virtual-machine.bin', content: 'x' }]), /optimized part of a virtual machine/],
    ['rootfs not a directory', gzipSync(tarball([
      { name: 'backup/index.yaml', content: indexYaml('evil') },
      { name: 'backup/container', type: '5' },
      { name: 'backup/container/rootfs', type: '2', linkname: escape },
    ])), /must be a directory/],
  ];
  for (const [what, body, message] of cases) {
    const res = await importBackup(body, { 'X-LXD-name': 'evil' });
    t.is(res.status, 400, `${what}: ${res.body}`);
    t.is(res.json?.type, 'error', what);
    t.regex(res.json?.error ?? '', message, what);
    await assertNothingLeft(t, 'evil');
  }
  t.deepEqual(readdirSync(escape).sort(), ['victim'], 'nothing written outside the data dir');
  t.is(readFileSync(victim, 'utf8'), 'untouched\n');
  t.is(statSync(victim).nlink, 1, 'no hard link to the victim');
  rmSync(escape, { recursive: true, force: true });
});

function gunzipToTar(gz: Buffer): Buffer {
  return execFileSync('gzip', ['-d', '-c'], { input: gz });
}

test.serial('JSON creation still works through the raw-body route, with or without a content type', async (t) => {
  const plain = await d.request('POST', '/1.0/instances', JSON.stringify({ name: 'json1', source: { type: 'image', alias: 'bb' } }), { 'content-type': 'application/x-www-form-urlencoded' });
  t.is(plain.status, 202, plain.body);
  await d.request('GET', `${plain.json.operation}/wait?timeout=60`);
  t.is((await d.request('POST', '/1.0/instances', '{not json', { 'content-type': 'application/json' })).status, 400);
  ok(t, await call('DELETE', '/1.0/instances/json1'), 'delete');
});

test.serial('expired backups are removed by the expiry task', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-expiry-'));
  rmSync(dir, { recursive: true });
  const d2 = await startWithPool({ dir });
  try {
    await importImage(d2, image.unified, 'bb');
    ok(t, await call('POST', '/1.0/instances', { name: 'ex', source: { type: 'image', alias: 'bb' } }, d2), 'create');
    const soon = new Date(Date.now() + 2000).toISOString();
    ok(t, await call('POST', '/1.0/instances/ex/backups', { name: 'short', expires_at: soon }, d2), 'expiring backup');
    ok(t, await call('POST', '/1.0/instances/ex/backups', { name: 'long', expires_at: '2099-01-01T00:00:00Z' }, d2), 'lasting backup');
    await new Promise((r) => setTimeout(r, 2500));
    await d2.stop();
    // The task runs at start, then hourly.
    const d3 = await startDaemon({ plugins: 'edge', dir });
    try {
      await waitFor(async () => (await d3.request('GET', '/1.0/instances/ex/backups')).json.metadata.length === 1, 10000, 'the expiry task');
      t.deepEqual((await d3.request('GET', '/1.0/instances/ex/backups')).json.metadata, ['/1.0/instances/ex/backups/long']);
      t.deepEqual(readdirSync(path.join(dir, 'backups', 'instances', 'ex')), ['long']);
      const ops = (await d3.request('GET', '/1.0/operations?recursion=1')).json.metadata;
      const all = [...(ops.success ?? []), ...(ops.running ?? [])];
      t.true(all.some((o: any) => o.description === 'Cleaning up expired instance backups'), 'visible as an operation');
    } finally {
      await d3.stop();
    }
  } finally {
    killContainers(dir);
    rmSync(dir, { recursive: true, force: true });
  }
});

test.serial('kill -9 during a backup and during an import leaves whole results or nothing', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-bkill-'));
  rmSync(dir, { recursive: true });
  const d2 = await startWithPool({ dir });
  try {
    await importImage(d2, image.unified, 'bb');
    ok(t, await call('POST', '/1.0/instances', { name: 'big', source: { type: 'image', alias: 'bb' } }, d2), 'create');
    execFileSync('dd', ['if=/dev/urandom', `of=${path.join(poolDir(d2), 'containers/big/rootfs/root/blob')}`, 'bs=1M', 'count=64', 'status=none']);
    ok(t, await call('POST', '/1.0/instances/big/backups', { name: 'ready', compression_algorithm: 'none' }, d2), 'a finished backup');
    const tarballBytes = (await exportBackup('big', 'ready', d2)).raw;

    const inflight = [
      d2.request('POST', '/1.0/instances/big/backups', { name: 'interrupted', compression_algorithm: 'xz' }).catch(() => undefined),
      importBackup(tarballBytes, { 'X-LXD-name': 'copy' }, d2).catch(() => undefined),
    ];
    await new Promise((r) => setTimeout(r, 400));
    d2.child.kill('SIGKILL');
    await Promise.all(inflight);
    await waitFor(() => d2.child.exitCode !== null || d2.child.signalCode !== null, 5000, 'the daemon to die');

    const d3 = await startDaemon({ plugins: 'edge', dir });
    try {
      const backups: string[] = (await d3.request('GET', '/1.0/instances/big/backups')).json.metadata;
      const files = readdirSync(path.join(dir, 'backups', 'instances', 'big')).sort();
      t.deepEqual(files, backups.map((b) => b.split('/').pop()!).sort(), 'a file for every backup record, no partial files');
      t.true(files.includes('ready'));
      const entries = readdirSync(path.join(dir, 'backups')).filter((e) => e !== 'instances' && e !== '.staging');
      t.deepEqual(entries, [], 'no work areas left');
      t.deepEqual(readdirSync(path.join(dir, 'backups', '.staging')), [], 'the staging mount point is empty');
      const names = (await d3.request('GET', '/1.0/instances')).json.metadata.map((u: string) => u.split('/').pop()).sort();
      t.deepEqual(volumes(d3), names, 'a volume for every instance record and no other');
      if (names.includes('copy')) {
        t.is(statSync(path.join(poolDir(d3), 'containers/copy/rootfs/root/blob')).size, 64 << 20, 'the imported instance is whole');
      }
    } finally {
      await d3.stop();
    }
  } finally {
    killContainers(dir);
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a tree shifted to host ids is shifted back once, keeping setuid bits and hard links', async (t) => {
  const root = mkdtempSync(path.join(tmpdir(), 'corral-unshift-'));
  try {
    const map = parseShift('[{"Isuid":true,"Isgid":false,"Hostid":1000000,"Nsid":0,"Maprange":1000000000},{"Isuid":false,"Isgid":true,"Hostid":1000000,"Nsid":0,"Maprange":1000000000}]');
    mkdirSync(path.join(root, 'home'));
    writeFileSync(path.join(root, 'home', 'f'), 'x');
    linkSync(path.join(root, 'home', 'f'), path.join(root, 'home', 'g'));
    writeFileSync(path.join(root, 'suid'), 'x');
    symlinkSync('/etc/passwd', path.join(root, 'link'));
    lchownSync(root, 1000000, 1000000);
    lchownSync(path.join(root, 'home'), 1001000, 1001000);
    // Inside the container this file belongs to uid 1000000, a host id once shifted: it must move once only.
    lchownSync(path.join(root, 'home', 'f'), 2000000, 2000000);
    lchownSync(path.join(root, 'suid'), 1000000, 1000005);
    chmodSync(path.join(root, 'suid'), 0o4755);
    lchownSync(path.join(root, 'link'), 1000000, 1000000);
    lchownSync(path.join(root, 'home'), 1001000, 1001000);
    t.is(await unshiftTree(root, map), 5);
    const owner = (p: string) => { const st = lstatSync(path.join(root, p)); return [st.uid, st.gid]; };
    t.deepEqual(owner('.'), [0, 0]);
    t.deepEqual(owner('home'), [1000, 1000]);
    t.deepEqual(owner('home/f'), [1000000, 1000000]);
    t.deepEqual(owner('home/g'), [1000000, 1000000]);
    t.deepEqual(owner('suid'), [0, 5]);
    t.is(statSync(path.join(root, 'suid')).mode & 0o7777, 0o4755);
    t.deepEqual(owner('link'), [0, 0]);
    t.deepEqual(parseShift('[]'), []);
    t.throws(() => parseShift('{bad'), { message: /not valid JSON/ });
    t.throws(() => parseShift('[{"Hostid":-1}]'), { message: /malformed/ });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
