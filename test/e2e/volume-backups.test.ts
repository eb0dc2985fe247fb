/**
 * Custom volume backups (custom_volume_backup): the API (create with name, expiry, volume_only and
 * compression, list, show, rename, export, delete), `lxc storage volume export/import` with
 * snapshots and X-LXD-name (backup_override_name), hostile and broken archives refused with
 * nothing left behind, backups following their volume, and tarballs moving both ways between
 * corral and a private reference daemon.
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, mkdirSync, chownSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { callAndWait, downloadRaw } from '../helpers/api.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../helpers/reference-daemon.js';

let d: Daemon;
let work: string;
const octet = { 'content-type': 'application/octet-stream' };
const vols = '/1.0/storage-pools/default/volumes/custom';
const volumeDir = (name: string, project = 'default') => path.join(d.dir, 'storage-pools', 'default', 'custom', `${project}_${name}`);

/** Member names of a tarball, as tar lists them. */
function members(file: string): string[] {
  const out = spawnSync('tar', ['-tf', file], { encoding: 'utf8' });
  if (out.status !== 0) throw new Error(out.stderr);
  return out.stdout.trim().split('\n');
}

/** Fill a volume's directory: a file owned by a container id, a subdirectory, a relative symlink. */
function fill(name: string, text: string): void {
  const dir = volumeDir(name);
  writeFileSync(path.join(dir, 'data.txt'), text);
  chownSync(path.join(dir, 'data.txt'), 1000, 1000);
  mkdirSync(path.join(dir, 'sub'));
  symlinkSync('../data.txt', path.join(dir, 'sub', 'link'));
}

/** What a refused import must not leave: a record, a volume directory, a scratch copy, a work area. */
function assertNothingLeft(t: any, name: string): void {
  const pool = path.join(d.dir, 'storage-pools', 'default', 'custom');
  t.deepEqual(readdirSync(pool).filter((e) => e.includes(name)), [], 'no volume directory nor scratch copy');
  t.deepEqual(readdirSync(path.join(d.dir, 'backups')).filter((e) => e.startsWith('.custom-')), [], 'no work area');
}

test.before(async () => {
  d = await startWithPool();
  work = mkdtempSync(path.join(tmpdir(), 'corral-vbk-'));
});

test.after.always(async () => {
  await stopDaemons();
  rmSync(work, { recursive: true, force: true });
});

test.serial('create, list, show, rename, export and delete volume backups (custom_volume_backup)', async (t) => {
  t.is((await d.request('POST', vols, { name: 'data' })).status, 200);
  fill('data', 'first\n');
  t.is((await callAndWait(d, 'POST', `${vols}/data/snapshots`, { name: 'snap0' })).op.status, 'Success');
  writeFileSync(path.join(volumeDir('data'), 'data.txt'), 'second\n');

  const events: any[] = [];
  const created = await callAndWait(d, 'POST', `${vols}/data/backups`, { name: 'b1', expires_at: '2040-01-02T03:04:05Z', compression_algorithm: 'xz' });
  t.is(created.op.status, 'Success', created.op.err);
  t.deepEqual(created.op.resources.backups, ['/1.0/backups/b1']);
  const shown = (await d.request('GET', `${vols}/data/backups/b1`)).json.metadata;
  t.like(shown, { name: 'b1', expires_at: '2040-01-02T03:04:05Z', volume_only: false, optimized_storage: false });
  t.regex(shown.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);

  // Default name, volume_only, and the server's compression when the request names none.
  t.is((await d.request('PUT', '/1.0', { config: { 'backups.compression_algorithm': 'zstd' } })).status, 200);
  t.is((await callAndWait(d, 'POST', `${vols}/data/backups`, { volume_only: true })).op.status, 'Success');
  t.deepEqual((await d.request('GET', `${vols}/data/backups`)).json.metadata, [`${vols}/data/backups/b1`, `${vols}/data/backups/backup0`]);
  const listed = (await d.request('GET', `${vols}/data/backups?recursion=1`)).json.metadata;
  t.deepEqual(listed.map((b: any) => [b.name, b.volume_only]), [['b1', false], ['backup0', true]]);

  const xz = await downloadRaw(d.socket, `${vols}/data/backups/b1/export`);
  t.is(xz.status, 200);
  t.is(xz.body.subarray(0, 6).toString('latin1'), '\xfd7zXZ\x00', 'xz as asked');
  t.regex(String(xz.headers['content-disposition']), /filename=b1\.tar\.xz/);
  writeFileSync(path.join(work, 'b1.tar.xz'), xz.body);
  t.deepEqual(members(path.join(work, 'b1.tar.xz')).filter((m) => !m.endsWith('/link')).sort(), [
    'backup/index.yaml', 'backup/volume-snapshots/snap0/', 'backup/volume-snapshots/snap0/data.txt', 'backup/volume-snapshots/snap0/sub/',
    'backup/volume/', 'backup/volume/data.txt', 'backup/volume/sub/',
  ]);
  const zst = await downloadRaw(d.socket, `${vols}/data/backups/backup0/export`);
  t.is(zst.body.readUInt32LE(0), 0xfd2fb528, 'zstd from backups.compression_algorithm');
  writeFileSync(path.join(work, 'b0.tar.zst'), zst.body);
  t.false(members(path.join(work, 'b0.tar.zst')).some((m) => m.includes('volume-snapshots')), 'volume_only leaves snapshots out');
  await d.request('PUT', '/1.0', { config: {} });

  // Bad input.
  t.is((await d.request('POST', `${vols}/data/backups`, { name: 'b1' })).status, 409);
  t.is((await d.request('POST', `${vols}/data/backups`, { name: 'a/b' })).status, 400);
  t.is((await d.request('POST', `${vols}/data/backups`, { compression_algorithm: 'rar' })).status, 400);
  t.is((await d.request('POST', `${vols}/data/backups`, { expires_at: 'tomorrow' })).status, 400);
  t.is((await d.request('POST', `${vols}/nope/backups`, {})).status, 404);
  t.is((await d.request('GET', `${vols}/data/backups/nope`)).status, 404);
  t.is((await d.request('POST', '/1.0/storage-pools/default/volumes/container/data/backups', {})).status, 400);

  const renamed = await callAndWait(d, 'POST', `${vols}/data/backups/b1`, { name: 'kept' });
  t.is(renamed.op.status, 'Success');
  t.is((await d.request('GET', `${vols}/data/backups/b1`)).status, 404);
  t.is((await downloadRaw(d.socket, `${vols}/data/backups/kept/export`)).body.length, xz.body.length);
  t.is((await d.request('POST', `${vols}/data/backups/kept`, { name: 'backup0' })).status, 409);
  t.is((await callAndWait(d, 'DELETE', `${vols}/data/backups/backup0`)).op.status, 'Success');
  t.deepEqual((await d.request('GET', `${vols}/data/backups`)).json.metadata, [`${vols}/data/backups/kept`]);

  // Backups follow a renamed volume and go with a deleted one.
  t.is((await d.request('POST', `${vols}/data`, { name: 'data2' })).status, 200);
  t.deepEqual((await d.request('GET', `${vols}/data2/backups`)).json.metadata, [`${vols}/data2/backups/kept`]);
  t.is((await downloadRaw(d.socket, `${vols}/data2/backups/kept/export`)).status, 200);
  t.false(existsSync(path.join(d.dir, 'backups', 'custom', 'default', 'default_data')));
  t.is((await d.request('DELETE', `${vols}/data2`)).status, 200);
  t.false(existsSync(path.join(d.dir, 'backups', 'custom', 'default', 'default_data2')));
  void events;
});

test.serial('lxc storage volume export then import, under the archived name and another one (backup_override_name)', async (t) => {
  await lxcOk(t, d.socket, 'storage', 'volume', 'create', 'default', 'src', 'user.kind=source');
  fill('src', 'old\n');
  await lxcOk(t, d.socket, 'storage', 'volume', 'snapshot', 'default', 'src', 'before');
  writeFileSync(path.join(volumeDir('src'), 'data.txt'), 'new\n');
  const file = path.join(work, 'src.tar.gz');
  await lxcOk(t, d.socket, 'storage', 'volume', 'export', 'default', 'src', file);
  t.true(statSync(file).size > 0);
  // lxc removes the backup it made on the server once downloaded.
  t.deepEqual((await d.request('GET', `${vols}/src/backups`)).json.metadata, []);

  await lxcOk(t, d.socket, 'storage', 'volume', 'import', 'default', file, 'copy1');
  const shown = (await d.request('GET', `${vols}/copy1`)).json.metadata;
  t.like(shown, { name: 'copy1', content_type: 'filesystem', config: { 'user.kind': 'source' } });
  t.is(readFileSync(path.join(volumeDir('copy1'), 'data.txt'), 'utf8'), 'new\n');
  t.is(statSync(path.join(volumeDir('copy1'), 'data.txt')).uid, 1000, 'owners kept');
  t.deepEqual((await d.request('GET', `${vols}/copy1/snapshots`)).json.metadata, [`${vols}/copy1/snapshots/before`]);
  const snapDir = path.join(d.dir, 'storage-pools', 'default', 'custom-snapshots', 'default_copy1', 'before');
  t.is(readFileSync(path.join(snapDir, 'data.txt'), 'utf8'), 'old\n');

  // The taken name is a 409 before anything is written; without a name the archive's is used.
  const again = await lxc(d.socket, 'storage', 'volume', 'import', 'default', file, 'copy1');
  t.not(again.status, 0);
  t.regex(again.stderr, /already exists/);
  await lxcOk(t, d.socket, 'storage', 'volume', 'delete', 'default', 'src');
  await lxcOk(t, d.socket, 'storage', 'volume', 'import', 'default', file);
  t.is(readFileSync(path.join(volumeDir('src'), 'data.txt'), 'utf8'), 'new\n');
});

/** Build a tarball with python's tarfile from a list of members. */
function craft(name: string, script: string): string {
  const out = path.join(work, name);
  const py = `
import tarfile, io, sys
t = tarfile.open(sys.argv[1], 'w:gz')
def f(name, data=b'x', **kw):
    i = tarfile.TarInfo(name); i.size = len(data)
    for k, v in kw.items(): setattr(i, k, v)
    t.addfile(i, io.BytesIO(data))
def dir(name):
    i = tarfile.TarInfo(name); i.type = tarfile.DIRTYPE; i.mode = 0o755; t.addfile(i)
def sym(name, target):
    i = tarfile.TarInfo(name); i.type = tarfile.SYMTYPE; i.linkname = target; t.addfile(i)
def hard(name, target):
    i = tarfile.TarInfo(name); i.type = tarfile.LNKTYPE; i.linkname = target; t.addfile(i)
def dev(name):
    i = tarfile.TarInfo(name); i.type = tarfile.CHRTYPE; i.devmajor = 1; i.devminor = 3; t.addfile(i)
index = b'name: evil\\ntype: custom\\npool: default\\noptimized: false\\nconfig:\\n  volume:\\n    config: {}\\n    content_type: filesystem\\n'
${script}
t.close()
`;
  const res = spawnSync('python3', ['-c', py, out], { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(res.stderr);
  return out;
}

test.serial('hostile and broken archives are refused with 400 and leave nothing behind', async (t) => {
  const outside = path.join(work, 'outside');
  const cases: [string, string, RegExp][] = [
    ['dotdot', "f('backup/index.yaml', index); dir('backup/volume'); f('backup/volume/../../escape', b'x')", /\.\./],
    ['absolute', `f('backup/index.yaml', index); dir('backup/volume'); f('${outside}/abs', b'x')`, /absolute/],
    ['symlink', `f('backup/index.yaml', index); dir('backup/volume'); sym('backup/volume/out', '${work}'); f('backup/volume/out/planted', b'x')`, /below the symlink/],
    ['hardlink', "f('backup/index.yaml', index); dir('backup/volume'); hard('backup/volume/h', '/etc/passwd')", /hard link/],
    ['device', "f('backup/index.yaml', index); dir('backup/volume'); dev('backup/volume/null')", /device node/],
    ['outside-backup', "f('backup/index.yaml', index); dir('backup/volume'); f('other/file', b'x')", /outside "backup\/"/],
    ['no-index', "dir('backup/volume'); f('backup/volume/a', b'x')", /index\.yaml is missing/],
    ['bad-yaml', "f('backup/index.yaml', b'name: [unclosed'); dir('backup/volume')", /not valid YAML/],
    ['instance', "f('backup/index.yaml', b'name: c\\ntype: container\\n'); dir('backup/volume')", /not of a custom volume/],
    ['missing-snapshot', "f('backup/index.yaml', index + b'snapshots:\\n- s0\\n'); dir('backup/volume')", /no backup\/volume-snapshots\/s0/],
    ['no-volume', "f('backup/index.yaml', index)", /no backup\/volume\//],
    ['bad-config', "f('backup/index.yaml', index.replace(b'config: {}', b'config: {nonsense.key: x}')); dir('backup/volume')", /nonsense\.key/],
  ];
  for (const [label, script, message] of cases) {
    const file = craft(`${label}.tar.gz`, script);
    const res = await d.request('POST', vols, readFileSync(file), { ...octet, 'X-LXD-name': `evil-${label}` });
    t.is(res.status, 400, `${label}: ${res.body}`);
    t.regex(res.json?.error ?? '', message, label);
    assertNothingLeft(t, `evil-${label}`);
  }
  t.false(existsSync(path.join(outside, 'abs')));
  t.false(existsSync(path.join(work, 'planted')));

  // A whole backup cut short; an empty body; something that is no tarball.
  await lxcOk(t, d.socket, 'storage', 'volume', 'create', 'default', 'whole');
  writeFileSync(path.join(volumeDir('whole'), 'big'), Buffer.alloc(256 * 1024, 7));
  t.is((await callAndWait(d, 'POST', `${vols}/whole/backups`, { name: 'b' })).op.status, 'Success');
  const good = (await downloadRaw(d.socket, `${vols}/whole/backups/b/export`)).body;
  for (const [label, body] of [['truncated', good.subarray(0, Math.floor(good.length / 2))], ['empty', Buffer.alloc(0)], ['text', Buffer.from('hello world, no tar here')]] as const) {
    const res = await d.request('POST', vols, body, { ...octet, 'X-LXD-name': `cut-${label}` });
    t.is(res.status, 400, `${label}: ${res.body}`);
    assertNothingLeft(t, `cut-${label}`);
  }
  // A name the volume API refuses.
  t.is((await d.request('POST', vols, good, { ...octet, 'X-LXD-name': 'a/b' })).status, 400);
  const ok = await callAndWait(d, 'POST', vols, good, { ...octet, 'X-LXD-name': 'whole2' });
  t.is(ok.op.status, 'Success', ok.op.err);
  t.is(statSync(path.join(volumeDir('whole2'), 'big')).size, 256 * 1024);
});

test.serial('kill -9 during a volume copy and a backup import: after a restart each target is whole or absent; expired backups go at boot', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-vbk-kill-'));
  const d2 = await startWithPool({ dir });
  const custom = path.join(dir, 'storage-pools', 'default', 'custom');
  const MB = 1024 * 1024;
  try {
    t.is((await d2.request('POST', vols, { name: 'big' })).status, 200);
    execFileSync('dd', ['if=/dev/zero', `of=${path.join(custom, 'default_big', 'blob')}`, 'bs=1M', 'count=200', 'status=none']);
    t.is((await callAndWait(d2, 'POST', `${vols}/big/snapshots`, { name: 'one' })).op.status, 'Success');
    t.is((await callAndWait(d2, 'POST', `${vols}/big/backups`, { name: 'plain', compression_algorithm: 'none' })).op.status, 'Success');
    const tarball = (await downloadRaw(d2.socket, `${vols}/big/backups/plain/export`)).body;
    t.is((await d2.request('POST', vols, { name: 'short' })).status, 200);
    t.is((await callAndWait(d2, 'POST', `${vols}/short/backups`, { name: 'soon', expires_at: new Date(Date.now() + 1000).toISOString() })).op.status, 'Success');
    t.is((await callAndWait(d2, 'POST', `${vols}/short/backups`, { name: 'later', expires_at: '2099-01-01T00:00:00Z' })).op.status, 'Success');

    // The import's upload is checked in the request; it is extracting when the daemon dies.
    const imported = await d2.request('POST', vols, tarball, { ...octet, 'X-LXD-name': 'imp' });
    t.is(imported.json?.type, 'async', imported.body);
    const copy = d2.request('POST', vols, { name: 'copy1', source: { type: 'copy', name: 'big' } }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 300));
    d2.child.kill('SIGKILL');
    await copy;
    await waitFor(() => d2.child.exitCode !== null || d2.child.signalCode !== null, 5000, 'the daemon to die');

    const d3 = await startWithPool({ dir });
    try {
      const listed = (await d3.request('GET', vols)).json.metadata.filter((u: string) => !u.includes('/snapshots/')).map((u: string) => u.split('/').pop()).sort();
      const onDisk = readdirSync(custom).map((e) => e.replace(/^default_/, '')).sort();
      t.deepEqual(onDisk, listed, 'a volume for every record, a record for every volume, no scratch copies');
      t.false(onDisk.some((e) => e.includes('..partial-')));
      for (const name of listed.filter((n: string) => n !== 'short')) {
        t.is(statSync(path.join(custom, `default_${name}`, 'blob')).size, 200 * MB, `${name} is whole`);
      }
      t.deepEqual(readdirSync(path.join(dir, 'backups')).filter((e) => e.startsWith('.custom-')), [], 'no work areas left');
      t.deepEqual((await d3.request('GET', `${vols}/short/backups`)).json.metadata, [`${vols}/short/backups/later`], 'the expired backup went at boot');
    } finally {
      await d3.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const missing = referenceUnavailable();
const interop = missing ? test.skip : test.serial;

interop('volume backups move between corral and the reference daemon both ways', async (t) => {
  let ref: ReferenceDaemon | undefined;
  try {
    ref = await startReference();
    // corral -> reference
    await lxcOk(t, d.socket, 'storage', 'volume', 'create', 'default', 'tored', 'user.from=corral');
    fill('tored', 'from corral\n');
    t.is((await callAndWait(d, 'POST', `${vols}/tored/snapshots`, { name: 'snapA' })).op.status, 'Success');
    t.is((await callAndWait(d, 'POST', `${vols}/tored/backups`, { name: 'x' })).op.status, 'Success');
    const ours = (await downloadRaw(d.socket, `${vols}/tored/backups/x/export`)).body;
    const imported = await ref.call('POST', vols, ours, { ...octet, 'X-LXD-name': 'fromcorral' });
    t.is(imported.op?.status, 'Success', `${imported.op?.err ?? imported.body}\n${ref.log()}`);
    const theirs = (await ref.request('GET', `${vols}/fromcorral`)).json.metadata;
    t.is(theirs.config['user.from'], 'corral');
    t.deepEqual((await ref.request('GET', `${vols}/fromcorral/snapshots`)).json.metadata, [`${vols}/fromcorral/snapshots/snapA`]);
    const refDir = path.join(ref.dir, 'storage-pools', 'default', 'custom', 'default_fromcorral');
    t.is(readFileSync(path.join(refDir, 'data.txt'), 'utf8'), 'from corral\n');

    // reference -> corral
    t.is((await ref.lxc('storage', 'volume', 'create', 'default', 'tocor', 'user.from=reference')).status, 0);
    writeFileSync(path.join(ref.dir, 'storage-pools', 'default', 'custom', 'default_tocor', 'ref.txt'), 'from the reference\n');
    t.is((await ref.lxc('storage', 'volume', 'snapshot', 'default', 'tocor', 'r0')).status, 0);
    const made = await ref.call('POST', `${vols}/tocor/backups`, { name: 'y' });
    t.is(made.op?.status, 'Success', made.op?.err);
    const refTarball = (await downloadRaw(ref.socket, `${vols}/tocor/backups/y/export`)).body;
    const back = await callAndWait(d, 'POST', vols, refTarball, octet);
    t.is(back.op.status, 'Success', back.op.err);
    t.is((await d.request('GET', `${vols}/tocor`)).json.metadata.config['user.from'], 'reference');
    t.is(readFileSync(path.join(volumeDir('tocor'), 'ref.txt'), 'utf8'), 'from the reference\n');
    t.deepEqual((await d.request('GET', `${vols}/tocor/snapshots`)).json.metadata, [`${vols}/tocor/snapshots/r0`]);
  } finally {
    await ref?.stop();
  }
});
