/**
 * Refusals and host-side protections of containers, through the real `lxc` client, as the
 * reference behaves when given the same commands: raw.lxc judged by liblxc when it is set,
 * security.protection.shift refusing a start under another id map, instance directories only the
 * container's root may pass (CVE-2016-1582), and raw.idmap mapping host root into a container.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { startWithPool, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { callAndWait } from '../helpers/api.js';
import { type BusyboxImage } from '../helpers/busybox-image.js';
import { startBusyboxDaemon, stopBusyboxDaemon } from '../helpers/busybox-daemon.js';

let d: Daemon;
let dir: string;
let image: BusyboxImage;

const ok = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const pool = () => path.join(dir, 'storage-pools', 'default');
const mode = (p: string) => statSync(p).mode & 0o7777;
const owner = (p: string) => statSync(p).uid;

async function refused(t: any, ...args: string[]): Promise<string> {
  const res = await lxc(d.socket, ...args);
  t.not(res.status, 0, `lxc ${args.join(' ')} should fail: ${res.stdout}`);
  return res.stderr;
}

/** Container root's host uid under the shared map: the first id of root's largest /etc/subuid range. */
function sharedRootUid(): number {
  const ranges = readFileSync('/etc/subuid', 'utf8').split('\n').map((l) => l.split(':')).filter((f) => f[0] === 'root').map((f) => ({ start: Number(f[1]), size: Number(f[2]) }));
  return ranges.reduce((a, b) => (b.size > a.size ? b : a), { start: 1_000_000, size: 0 }).start;
}

test.before(async () => {
  ({ d, dir, image } = await startBusyboxDaemon('corral-security-'));
});

test.after.always(async () => {
  await stopBusyboxDaemon({ d, dir, image });
});

test.serial('raw.lxc is judged by liblxc when it is set: create, config set, profile edits that reach an instance', async (t) => {
  await ok(t, 'init', 'bb', 'rl1');
  // The reference refuses an unknown key at set time by having liblxc parse it.
  t.regex(await refused(t, 'config', 'set', 'rl1', 'raw.lxc=lxc.notaconfigkey=invalid'), /lxc\.notaconfigkey = invalid/);
  t.regex(await refused(t, 'config', 'set', 'rl1', 'raw.lxc=lxc.cap.drop=notacap'), /lxc\.cap\.drop = notacap.*capability/);
  t.is((await ok(t, 'config', 'get', 'rl1', 'raw.lxc')).trim(), '', 'nothing stored');
  // Keys the daemon owns stay refused, whatever their case.
  t.regex(await refused(t, 'config', 'set', 'rl1', 'raw.lxc=lxc.prlimit.nofile=10'), /limits\.kernel/);
  t.regex(await refused(t, 'config', 'set', 'rl1', 'raw.lxc=LXC.LOGFILE=/tmp/x'), /lxc\.logfile is not allowed/);
  // What liblxc takes is taken (lines without "lxc." it ignores, as the reference's liblxc does).
  await ok(t, 'config', 'set', 'rl1', 'raw.lxc=lxc.uts.name=from-raw');
  await ok(t, 'config', 'set', 'rl1', 'raw.lxc=notlxc.key=1');
  await ok(t, 'config', 'unset', 'rl1', 'raw.lxc');
  // PUT and PATCH through the API answer 400 naming the line (the reference answers 500).
  const patched = await d.request('PATCH', '/1.0/instances/rl1', { config: { 'raw.lxc': 'lxc.uts.name = a\nlxc.notaconfigkey = invalid' } });
  t.is(patched.status, 400);
  t.regex(patched.json.error, /raw\.lxc.*"lxc\.notaconfigkey = invalid"/);

  // A create with such a line leaves nothing behind.
  t.regex(await refused(t, 'init', 'bb', 'rl2', '-c', 'raw.lxc=lxc.notaconfigkey=invalid'), /lxc\.notaconfigkey/);
  t.false((await ok(t, 'list', '--format', 'csv', '-c', 'n')).includes('rl2'));

  // A profile no instance uses may hold it (the reference stores it too); adding it to an instance is refused.
  await ok(t, 'profile', 'create', 'rawbad');
  await ok(t, 'profile', 'set', 'rawbad', 'raw.lxc=lxc.notaconfigkey=invalid');
  t.regex(await refused(t, 'profile', 'add', 'rl1', 'rawbad'), /lxc\.notaconfigkey/);
  t.deepEqual(JSON.parse(await ok(t, 'list', 'rl1', '--format', 'json'))[0].profiles, ['default']);
  // A profile an instance uses: the edit is refused and the profile kept as it was (the reference saves it anyway).
  await ok(t, 'profile', 'create', 'rawgood');
  await ok(t, 'profile', 'add', 'rl1', 'rawgood');
  t.regex(await refused(t, 'profile', 'set', 'rawgood', 'raw.lxc=lxc.notaconfigkey=invalid'), /rl1.*lxc\.notaconfigkey/);
  t.is((await ok(t, 'profile', 'get', 'rawgood', 'raw.lxc')).trim(), '');
  await ok(t, 'profile', 'set', 'rawgood', 'raw.lxc=lxc.uts.name=via-profile');
  await ok(t, 'start', 'rl1');
  // The image's init sets the hostname from /etc/hostname: the generated config shows the line.
  t.regex(readFileSync(path.join(dir, 'containers', 'rl1', 'config'), 'utf8'), /^lxc\.uts\.name = via-profile$/m);
  await ok(t, 'delete', '--force', 'rl1');
  await ok(t, 'profile', 'delete', 'rawgood');
  await ok(t, 'profile', 'delete', 'rawbad');
});

test.serial('security.protection.shift (container_protection_shift) refuses a start under another id map, as a failed operation', async (t) => {
  // Files as unpacked from the image, started unprivileged for the first time: a shift.
  await ok(t, 'init', 'bb', 'sh1', '-c', 'security.protection.shift=true');
  t.regex(await refused(t, 'start', 'sh1'), /protected against id shifting/);
  const { op } = await callAndWait(d, 'PUT', '/1.0/instances/sh1/state', { action: 'start' });
  t.is(op.status, 'Failure');
  t.is(op.status_code, 400);
  t.regex(op.err, /security\.protection\.shift/);
  t.regex(await ok(t, 'info', 'sh1'), /Status: STOPPED/);

  // Privileged from the start: no map, nothing shifts.
  await ok(t, 'init', 'bb', 'sh2', '-c', 'security.protection.shift=true', '-c', 'security.privileged=true');
  await ok(t, 'start', 'sh2');
  await ok(t, 'restart', '--force', 'sh2');
  // Changed while running, as the reference allows: the key is read only at a start.
  await ok(t, 'config', 'set', 'sh2', 'security.protection.shift=false');
  await ok(t, 'config', 'set', 'sh2', 'security.protection.shift=true');

  // Started once without the protection, then protected: the same map starts again...
  await ok(t, 'config', 'unset', 'sh1', 'security.protection.shift');
  await ok(t, 'start', 'sh1');
  await ok(t, 'stop', '--force', 'sh1');
  await ok(t, 'config', 'set', 'sh1', 'security.protection.shift=true');
  await ok(t, 'start', 'sh1');
  await ok(t, 'stop', '--force', 'sh1');
  // ...a privilege change or a new raw.idmap does not.
  await ok(t, 'config', 'set', 'sh1', 'security.privileged=true');
  t.regex(await refused(t, 'start', 'sh1'), /protected against id shifting/);
  await ok(t, 'config', 'unset', 'sh1', 'security.privileged');
  await ok(t, 'config', 'set', 'sh1', 'raw.idmap=both 0 0');
  t.regex(await refused(t, 'start', 'sh1'), /protected against id shifting/);
  await ok(t, 'config', 'unset', 'sh1', 'raw.idmap');
  await ok(t, 'start', 'sh1');
  await ok(t, 'delete', '--force', 'sh1');
  await ok(t, 'delete', '--force', 'sh2');
});

test.serial('raw.idmap=both 0 0 maps host root into the container; host ids root may not map are refused at start', async (t) => {
  await ok(t, 'init', 'bb', 'id1', '-c', 'raw.idmap=both 0 0');
  await ok(t, 'start', 'id1');
  const rows = (file: string) => ok(t, 'exec', 'id1', '--', 'cat', file).then((s) => s.trim().split('\n').map((l) => l.trim().split(/\s+/).map(Number)));
  const root = sharedRootUid();
  t.deepEqual((await rows('/proc/self/uid_map'))[0], [0, 0, 1]);
  t.deepEqual((await rows('/proc/self/uid_map'))[1]?.slice(0, 2), [1, root + 1]);
  t.deepEqual((await rows('/proc/self/gid_map'))[0], [0, 0, 1]);
  // The container's root is the host's: the instance directory is root's.
  t.is(owner(path.join(pool(), 'containers', 'id1')), 0);
  await ok(t, 'stop', '--force', 'id1');
  // A range through host root is root's choice too (the reference starts it).
  await ok(t, 'config', 'set', 'id1', 'raw.idmap=both 0-1 0-1');
  await ok(t, 'start', 'id1');
  t.deepEqual((await rows('/proc/self/uid_map'))[0], [0, 0, 2]);
  await ok(t, 'stop', '--force', 'id1');
  // A host uid outside root's subordinate ids (and not root's own): refused by newuidmap in the reference, by the daemon here.
  const delegated = spawnSync('grep', ['-q', '^root:5000:', '/etc/subuid']).status === 0;
  if (!delegated) {
    await ok(t, 'config', 'set', 'id1', 'raw.idmap=uid 5000 0');
    t.regex(await refused(t, 'start', 'id1'), /host uid 5000.*\/etc\/subuid/);
    t.regex(await ok(t, 'info', 'id1'), /Status: STOPPED/);
  } else {
    t.log('not checked here: the refusal of host uid 5000, which this host\'s /etc/subuid gives to root');
  }
  await ok(t, 'delete', '--force', 'id1');
});

test.serial('instance directories: only the container root may pass (0100), on create, privilege change, snapshot and boot', async (t) => {
  const root = sharedRootUid();
  const volume = (name: string) => path.join(pool(), 'containers', name);
  await ok(t, 'init', 'bb', 'pv', '-c', 'security.privileged=true');
  await ok(t, 'init', 'bb', 'up');
  t.is(mode(volume('pv')), 0o100);
  t.is(owner(volume('pv')), 0);
  t.is(mode(volume('up')), 0o100);
  t.is(owner(volume('up')), root);
  await ok(t, 'start', 'pv');
  await ok(t, 'start', 'up');
  t.is((await ok(t, 'exec', 'up', '--', 'id', '-u')).trim(), '0');
  // An unprivileged host user cannot reach the setuid binaries inside.
  const nobody = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'ls', path.join(volume('pv'), 'rootfs', 'bin')], { encoding: 'utf8' });
  t.not(nobody.status, 0, 'uid 65534 listed the privileged rootfs');
  t.regex(nobody.stderr, /Permission denied/);

  await ok(t, 'snapshot', 'pv', 's1');
  await ok(t, 'snapshot', 'up', 's1');
  t.is(mode(path.join(pool(), 'containers-snapshots', 'pv', 's1')), 0o100);
  t.is(mode(path.join(pool(), 'containers-snapshots', 'up', 's1')), 0o100);
  t.is(owner(path.join(pool(), 'containers-snapshots', 'up', 's1')), root);

  // Privilege changes move the owner at once.
  await ok(t, 'stop', '--force', 'up');
  await ok(t, 'config', 'set', 'up', 'security.privileged=true');
  t.is(owner(volume('up')), 0);
  await ok(t, 'config', 'set', 'up', 'security.privileged=false');
  t.is(owner(volume('up')), root);
  t.is(mode(volume('up')), 0o100);

  // The daemon's own directories: the lxcpath passable, each container's and the logs root's alone.
  t.is(mode(path.join(dir, 'containers')), 0o711);
  t.is(mode(path.join(dir, 'containers', 'pv')), 0o700);
  t.is(mode(path.join(dir, 'logs')), 0o700);
  t.is(mode(path.join(pool(), 'containers')), 0o711);

  // Directories left open by an older version (which did not record the rules it kept) are closed at boot.
  const rules = path.join(dir, 'instance-directory-rules');
  t.is(readFileSync(rules, 'utf8'), '1\n', 'the rules the directories were brought to are recorded');
  for (const p of [volume('up'), path.join(pool(), 'containers-snapshots', 'up', 's1'), path.join(dir, 'logs'), path.join(dir, 'containers', 'pv')]) chmodSync(p, 0o755);
  rmSync(rules);
  await d.stop();
  d = await startWithPool({ dir });
  t.is(readFileSync(rules, 'utf8'), '1\n');
  t.is(mode(volume('up')), 0o100);
  t.is(owner(volume('up')), root);
  t.is(mode(path.join(pool(), 'containers-snapshots', 'up', 's1')), 0o100);
  t.is(mode(path.join(dir, 'logs')), 0o700);
  t.is(mode(path.join(dir, 'containers', 'pv')), 0o700);
  // The privileged container kept running through the restart.
  t.regex(await ok(t, 'info', 'pv'), /Status: RUNNING/);
  // Opened by hand later (boots no longer walk every directory): its start closes it again.
  chmodSync(volume('up'), 0o755);
  await ok(t, 'start', 'up');
  t.is(mode(volume('up')), 0o100);

  // An instance imported from a backup, snapshots and all, is closed the same way.
  const tarball = path.join(dir, 'up.tar.gz');
  await ok(t, 'export', 'up', tarball);
  await ok(t, 'import', tarball, 'up2');
  t.is(mode(volume('up2')), 0o100);
  t.is(owner(volume('up2')), root);
  t.is(mode(path.join(pool(), 'containers-snapshots', 'up2', 's1')), 0o100);
  await ok(t, 'delete', '--force', 'up2');
  await ok(t, 'delete', '--force', 'up');
  await ok(t, 'delete', '--force', 'pv');
});
