/**
 * Syscall policy and interception through the real `lxc` client on real unprivileged containers:
 * security.syscalls.deny makes a syscall fail inside (and a restart without it brings it back), an
 * unknown name is a 400, the combinations the reference refuses are refused; with
 * security.syscalls.intercept.mknod the seccomp notify proxy creates the harmless devices for the
 * container and refuses the others; the proxy lives once per daemon and ends with it.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { distRoot, startDaemon, waitFor, type Daemon } from '../helpers/daemon.js';
import { hasLxc, lxc, lxcOk } from '../helpers/clients.js';
import { type BusyboxImage } from '../helpers/busybox-image.js';
import { startBusyboxDaemon, stopBusyboxDaemon } from '../helpers/busybox-daemon.js';
import { claimsNamed } from '../helpers/claims.js';
import { execOk, interceptDiagnosis } from '../helpers/intercept-diagnosis.js';

let d: Daemon;
let dir: string;
let image: BusyboxImage;

/** lxc that must succeed; a failed exec says why liblxc could not reach the proxy, should that be the cause. */
const ok = async (t: any, ...args: string[]) => (args[0] === 'exec' ? (await execOk(t, d, args[1]!, ...args.slice(2))).stdout : lxcOk(t, d.socket, ...args));

/** Processes of the seccomp proxy of this daemon (found by its socket path on the command line): pid and parent. */
function proxyProcesses(): { pid: number; ppid: number }[] {
  const socket = path.join(dir, 'seccomp.socket');
  const found: { pid: number; ppid: number }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (!argv[0]?.endsWith('corral-seccomp-proxy') || argv[1] !== socket) continue;
      const ppid = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      found.push({ pid: Number(entry), ppid });
    } catch { /* gone */ }
  }
  return found;
}

/** The proxies the daemon runs: the process holding the socket (its server is a child of it). */
function proxyPids(): number[] {
  const all = proxyProcesses();
  return all.filter((p) => !all.some((q) => q.pid === p.ppid)).map((p) => p.pid);
}

/**
 * Whether the proxy's socket path takes a connection, as a monitor's reconnect makes it (a SOCK_SEQPACKET
 * connect, which node cannot make). The proxy binds beside the path and renames the socket over it, so
 * /proc/net/unix names the bound file, not the path.
 */
function proxyListening(): boolean {
  const socket = path.join(dir, 'seccomp.socket');
  const probe = 'import socket, sys\ns = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\ns.connect(sys.argv[1])';
  return spawnSync('python3', ['-c', probe, socket], { stdio: 'ignore', timeout: 5_000 }).status === 0;
}

/** The server child of the proxy `holder`, serving the monitors. */
function proxyServer(holder: number): number | undefined {
  return proxyProcesses().find((p) => p.ppid === holder)?.pid;
}

const skip = !hasLxc() ? 'the lxc client is not installed' : undefined;

test.before(async () => {
  if (skip) return;
  ({ d, dir, image } = await startBusyboxDaemon('corral-u2-sys-'));
});

test.after.always(async () => {
  if (skip) return;
  await stopBusyboxDaemon({ d, dir, image });
});

const serial = skip ? test.serial.skip : test.serial;

serial('container_syscall_filtering and container_syscall_filtering_allow_deny_syntax: a denied syscall fails inside, unknown names and refused combinations are 400', async (t) => {
  await ok(t, 'init', 'bb', 'u2deny');
  // Unknown names and bad lists are refused when set, nothing stored.
  for (const bad of ['security.syscalls.deny=notasyscall', 'security.syscalls.allow=mkdir\nnotasyscall', 'security.syscalls.blacklist=not a list']) {
    const res = await d.request('PATCH', '/1.0/instances/u2deny', { config: { [bad.split('=')[0]!]: bad.slice(bad.indexOf('=') + 1) } });
    t.is(res.status, 400, bad);
    t.regex(res.json.error, /security\.syscalls\.(deny|allow|blacklist).*(Unknown system call "notasyscall"|not a system call name)/);
  }
  const bool = await lxc(d.socket, 'config', 'set', 'u2deny', 'security.syscalls.deny_compat=maybe');
  t.not(bool.status, 0);
  t.regex(bool.stderr, /boolean/);
  // What the reference refuses together.
  await ok(t, 'config', 'set', 'u2deny', 'security.syscalls.deny=chroot');
  t.regex((await lxc(d.socket, 'config', 'set', 'u2deny', 'security.syscalls.allow=read')).stderr, /allow.*cannot be used together with/);
  t.regex((await lxc(d.socket, 'config', 'set', 'u2deny', 'security.syscalls.blacklist=mkdir')).stderr, /old name "security\.syscalls\.blacklist"/);
  await ok(t, 'config', 'unset', 'u2deny', 'security.syscalls.deny');
  t.is((await ok(t, 'config', 'get', 'u2deny', 'security.syscalls.allow')).trim(), '', 'nothing stored');

  // Without a deny list mkdir works; with one the process is killed (SIGSYS), as with the reference.
  await ok(t, 'start', 'u2deny');
  await ok(t, 'exec', 'u2deny', '--', 'mkdir', '/u2-before');
  await ok(t, 'stop', 'u2deny', '--force');
  await ok(t, 'config', 'set', 'u2deny', 'security.syscalls.deny=mkdir\nmkdirat');
  await ok(t, 'start', 'u2deny');
  const denied = await lxc(d.socket, 'exec', 'u2deny', '--', 'mkdir', '/u2-denied');
  t.not(denied.status, 0, 'mkdir is denied');
  t.is((await ok(t, 'exec', 'u2deny', '--', 'sh', '-c', 'mkdir /u2-denied; echo rc=$?')).trim(), 'rc=159', '128 + SIGSYS');
  t.not((await lxc(d.socket, 'exec', 'u2deny', '--', 'test', '-d', '/u2-denied')).status, 0, 'nothing made');
  const profile = readFileSync(path.join(dir, 'containers', 'u2deny', 'seccomp.profile'), 'utf8');
  t.regex(profile, /^2\ndenylist\n\[all\]\nreject_force_umount\n\[all\]\nkexec_load errno 38\n/);
  t.regex(profile, /\nmkdir\nmkdirat\n$/);
  await ok(t, 'stop', 'u2deny', '--force');
  await ok(t, 'config', 'unset', 'u2deny', 'security.syscalls.deny');
  await ok(t, 'start', 'u2deny');
  await ok(t, 'exec', 'u2deny', '--', 'mkdir', '/u2-after');

  // The old name still works; deny_compat and an allow list make profiles liblxc accepts.
  await ok(t, 'stop', 'u2deny', '--force');
  await ok(t, 'config', 'set', 'u2deny', 'security.syscalls.blacklist=chroot', 'security.syscalls.blacklist_compat=true');
  await ok(t, 'start', 'u2deny');
  t.is((await ok(t, 'exec', 'u2deny', '--', 'sh', '-c', 'chroot / true; echo rc=$?')).trim(), 'rc=159');
  const compat = readFileSync(path.join(dir, 'containers', 'u2deny', 'seccomp.profile'), 'utf8');
  t.regex(compat, /\n\[x86_64\]\ncompat_sys_rt_sigaction errno 38\n(.*\n)*chroot\n$/);
  await ok(t, 'stop', 'u2deny', '--force');
  await ok(t, 'config', 'unset', 'u2deny', 'security.syscalls.blacklist');
  await ok(t, 'config', 'unset', 'u2deny', 'security.syscalls.blacklist_compat');
  await ok(t, 'config', 'set', 'u2deny', 'security.syscalls.deny_default=false');
  await ok(t, 'start', 'u2deny');
  t.false(readFileSync(path.join(dir, 'containers', 'u2deny', 'config'), 'utf8').includes('lxc.seccomp.profile'), 'nothing to filter: no profile');
  await ok(t, 'delete', '--force', 'u2deny');
});

serial('seccomp_notify and container_syscall_intercept: intercepted mknod creates the harmless devices in an unprivileged container and refuses others', async (t) => {
  await ok(t, 'launch', 'bb', 'u2mknod');
  // Without interception an unprivileged container can create no device at all.
  t.not((await lxc(d.socket, 'exec', 'u2mknod', '--', 'mknod', '/tmp/n', 'c', '1', '3')).status, 0);
  t.not((await lxc(d.socket, 'exec', 'u2mknod', '--', 'mknod', '/tmp/b', 'b', '7', '0')).status, 0);
  t.deepEqual(proxyPids(), [], 'no proxy while no container needs it');
  t.regex((await lxc(d.socket, 'config', 'set', 'u2mknod', 'security.syscalls.intercept.mknod=maybe')).stderr, /boolean/);
  // Interceptions this server does not do are refused, not silently ignored.
  for (const key of ['security.syscalls.intercept.mount.fuse=ext4=fuse2fs']) {
    const res = await lxc(d.socket, 'config', 'set', 'u2mknod', key);
    t.not(res.status, 0, key);
    t.regex(res.stderr, /not available in this server/);
  }
  await ok(t, 'config', 'set', 'u2mknod', 'security.syscalls.intercept.mount.fuse=');
  // The reference 5.0 has no sysinfo interception either.
  t.regex((await lxc(d.socket, 'config', 'set', 'u2mknod', 'security.syscalls.intercept.sysinfo=true')).stderr, /Unknown configuration key/);
  await ok(t, 'stop', 'u2mknod', '--force');
  await ok(t, 'config', 'set', 'u2mknod', 'security.syscalls.intercept.mknod=true');
  await ok(t, 'start', 'u2mknod');
  const [proxy] = proxyPids();
  t.truthy(proxy, 'the proxy runs');

  // An allowed device: created, owned by the caller, usable.
  await ok(t, 'exec', 'u2mknod', '--', 'mknod', '/tmp/n', 'c', '1', '3');
  const listing = await ok(t, 'exec', 'u2mknod', '--', 'ls', '-ln', '/tmp/n');
  t.regex(listing, /^crw-r--r--\s+1\s+0\s+0\s+1,\s+3 /);
  await ok(t, 'exec', 'u2mknod', '--', 'sh', '-c', 'echo x > /tmp/n');
  await ok(t, 'exec', 'u2mknod', '--', 'mknod', '/tmp/z', 'c', '1', '5');
  t.is((await ok(t, 'exec', 'u2mknod', '--', 'od', '-An', '-tx1', '-N4', '/tmp/z')).trim(), '00 00 00 00');
  // Relative to the caller's cwd, as another user: the node is that user's.
  await ok(t, 'exec', 'u2mknod', '--', 'sh', '-c', 'mkdir -p /tmp/u && chown 1000:1000 /tmp/u');
  await ok(t, 'exec', 'u2mknod', '--user', '1000', '--group', '1000', '--cwd', '/tmp/u', '--', 'mknod', 'null', 'c', '1', '3');
  t.regex(await ok(t, 'exec', 'u2mknod', '--', 'ls', '-ln', '/tmp/u/null'), /\s1000\s+1000\s+1,\s+3 /);
  // mknodat relative to a directory fd; a dirfd that is no directory gets the kernel's ENOTDIR.
  await ok(t, 'file', 'push', mknodatProgram(), 'u2mknod/bin/mknodat-in', '--mode', '0755');
  await ok(t, 'exec', 'u2mknod', '--', 'mknodat-in', '/tmp/u', 'null2');
  t.regex(await ok(t, 'exec', 'u2mknod', '--', 'ls', '-ln', '/tmp/u/null2'), /^crw-r--r--\s+1\s+0\s+0\s+1,\s+3 /);
  t.regex((await lxc(d.socket, 'exec', 'u2mknod', '--', 'mknodat-in', '/tmp/n', 'x')).stderr, /Not a directory/);
  // Container root's DAC override reaches only directories of its own namespace: not one owned by an
  // id its map does not hold (made from the host), as the kernel would judge it.
  const unmapped = path.join(dir, 'storage-pools', 'default', 'containers', 'u2mknod', 'rootfs', 'tmp', 'unmapped');
  mkdirSync(unmapped, { mode: 0o755 });
  chownSync(unmapped, 2_000_000_000, 2_000_000_000);
  t.regex((await lxc(d.socket, 'exec', 'u2mknod', '--', 'mknod', '/tmp/unmapped/n', 'c', '1', '3')).stderr, /Permission denied/);
  t.regex((await lxc(d.socket, 'exec', 'u2mknod', '--', 'mkdir', '/tmp/unmapped/d')).stderr, /Permission denied/, 'the kernel says the same');
  // A user without write permission on the directory gets nothing more than the kernel would give.
  const noWrite = await lxc(d.socket, 'exec', 'u2mknod', '--user', '1000', '--group', '1000', '--', 'mknod', '/u2-root-owned', 'c', '1', '3');
  t.not(noWrite.status, 0);
  t.regex(noWrite.stderr, /Permission denied/);

  // Anything else: EPERM, nothing created.
  const block = await lxc(d.socket, 'exec', 'u2mknod', '--', 'mknod', '/tmp/b', 'b', '7', '0');
  t.not(block.status, 0);
  t.regex(block.stderr, /Operation not permitted/);
  const mem = await lxc(d.socket, 'exec', 'u2mknod', '--', 'mknod', '/tmp/mem', 'c', '1', '1');
  t.not(mem.status, 0);
  t.regex(mem.stderr, /Operation not permitted/);
  t.not((await lxc(d.socket, 'exec', 'u2mknod', '--', 'test', '-e', '/tmp/b')).status, 0);
  // Existing paths keep the kernel's answer.
  t.regex((await lxc(d.socket, 'exec', 'u2mknod', '--', 'mknod', '/tmp/n', 'c', '1', '3')).stderr, /File exists/);
  // Files and fifos are not intercepted.
  await ok(t, 'exec', 'u2mknod', '--', 'mkfifo', '/tmp/f');

  // One proxy, kept across stops and starts of containers.
  await ok(t, 'stop', 'u2mknod', '--force');
  t.deepEqual(proxyPids(), [proxy]);
  await ok(t, 'start', 'u2mknod');
  await ok(t, 'exec', 'u2mknod', '--', 'mknod', '/tmp/n2', 'c', '1', '9');
  t.deepEqual(proxyPids(), [proxy]);

  // In a privileged container what is not served goes on to the kernel, which allows it there.
  await ok(t, 'init', 'bb', 'u2priv', '-c', 'security.privileged=true', '-c', 'security.syscalls.intercept.mknod=true');
  await ok(t, 'start', 'u2priv');
  await ok(t, 'exec', 'u2priv', '--', 'mknod', '/tmp/b', 'b', '7', '0');
  t.regex(await ok(t, 'exec', 'u2priv', '--', 'ls', '-ln', '/tmp/b'), /^brw/);
  await ok(t, 'delete', '--force', 'u2priv');

  // A server that dies is replaced by the process holding the socket: the monitor's reconnect is
  // never refused, so the very next call is served (a refused one would leave exec sessions without
  // interception in liblxc), without waiting for the daemon.
  const server = proxyServer(proxy!);
  t.truthy(server, 'the proxy serves from a child');
  process.kill(server!, 'SIGKILL');
  await ok(t, 'exec', 'u2mknod', '--', 'mknod', '/tmp/after-server', 'c', '1', '8');
  t.deepEqual(proxyPids(), [proxy], 'the same proxy holds the socket');
  t.not(proxyServer(proxy!), server, 'with a new server');
  // A holder that dies whole leaves its server serving the same socket until the daemon's next proxy
  // has taken the path over: a call in between is served (a refused reconnect would leave the
  // container's exec sessions without interception for good), and so is one after it.
  const orphan = proxyServer(proxy!);
  t.truthy(orphan, 'the holder\'s server before the kill');
  process.kill(proxy!, 'SIGKILL');
  await ok(t, 'exec', 'u2mknod', '--', 'mknod', '/tmp/after-holder', 'c', '1', '8');
  const daemonPid = d.child.pid;
  const restarted = () => proxyProcesses().filter((p) => p.ppid === daemonPid && p.pid !== proxy).map((p) => p.pid);
  await waitFor(() => restarted().length === 1, 10_000, 'the daemon\'s new proxy');
  await waitFor(() => !proxyProcesses().some((p) => p.pid === orphan), 10_000, 'the old server to end once the new proxy holds the path');
  t.true(proxyListening(), 'the new proxy listens');
  // The monitor finds the old server's connection closed, and its reconnect reaches the new proxy at once.
  await ok(t, 'exec', 'u2mknod', '--', 'mknod', '/tmp/after-restart', 'c', '1', '8');
  t.deepEqual(proxyPids(), restarted(), 'one proxy, the daemon\'s');
});

/** Polls a mknod inside until it succeeds (the monitor reconnects to the proxy at its next notification); the last error in the failure. */
async function mknodWorks(name: string, args: string[], what: string): Promise<void> {
  let last = '';
  try {
    await waitFor(async () => {
      const run = await lxc(d.socket, 'exec', name, '--', 'mknod', `/tmp/m${Date.now()}`, ...args);
      last = run.stderr.trim();
      return run.status === 0;
    }, 30_000, what);
  } catch (err) {
    throw new Error(`${(err as Error).message}; the last mknod said: ${last || '(nothing)'}\n${await interceptDiagnosis(d, name)}`);
  }
}

/** A static program built with musl-gcc (busybox has neither setfattr nor a mknodat with a directory fd). */
function program(name: string, body: string): string {
  const src = path.join(dir, `${name}.c`);
  writeFileSync(src, `#include <fcntl.h>\n#include <stdio.h>\n#include <string.h>\n#include <sys/stat.h>\n#include <sys/sysmacros.h>\n#include <sys/xattr.h>\nint main(int c, char **v) {\n${body}\n}\n`);
  const out = path.join(dir, name);
  const built = spawnSync('musl-gcc', ['-static', '-Os', '-o', out, src], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`musl-gcc failed: ${built.stderr}`);
  return out;
}

const setxattrProgram = () => program('setx', '  if (c != 4) return 2;\n  if (setxattr(v[1], v[2], v[3], strlen(v[3]), 0) < 0) { perror("setxattr"); return 1; }\n  return 0;');
/** mknodat(open(dir), name, c 1:3). */
const mknodatProgram = () => program('mknodat-in', '  if (c != 3) return 2;\n  int fd = open(v[1], O_RDONLY);\n  if (fd < 0 || mknodat(fd, v[2], S_IFCHR | 0644, makedev(1, 3)) < 0) { perror("mknodat"); return 1; }\n  return 0;');

serial('exec sessions into containers with intercepted syscalls, two at a time, each get their listener: liblxc\'s attach is ordered', async (t) => {
  // Without the preloaded ordering (attach-order.c), about one such exec in fifty on this machine
  // exited 1 without a word, its intercepted calls failing with ENOSYS.
  t.true(existsSync(path.join(distRoot, 'plugins', 'instance-lxc', 'corral-attach-order.so')), 'npm run build made the preload');
  const names = ['u2order1', 'u2order2'];
  for (const name of names) await ok(t, 'launch', 'bb', name, '-c', 'security.syscalls.intercept.mknod=true');
  const failures: string[] = [];
  await Promise.all(names.map(async (name) => {
    for (let i = 0; i < 60; i++) {
      const made = await lxc(d.socket, 'exec', name, '--', 'mknod', `/tmp/n${i}`, 'c', '1', '3');
      if (made.status !== 0) failures.push(`${name} mknod ${i}: ${made.status} ${made.stderr.trim()}`);
      const listed = await lxc(d.socket, 'exec', name, '--', 'ls', '-ln', `/tmp/n${i}`);
      if (listed.status !== 0 || !/^crw/.test(listed.stdout)) failures.push(`${name} ls ${i}: ${listed.status} ${listed.stderr.trim()}`);
    }
  }));
  t.deepEqual(failures, []);
  // The preload is lxc-attach's own: the command's environment is only what was asked for.
  t.notRegex(await ok(t, 'exec', names[0]!, '--', 'env'), /LD_PRELOAD/);
  for (const name of names) await ok(t, 'delete', '--force', name);
});

serial('container_syscall_intercept: intercepted setxattr sets the overlay opaque mark on directories the caller owns, the rest is the kernel\'s', async (t) => {
  const setx = setxattrProgram();
  await ok(t, 'launch', 'bb', 'u2xattr');
  await ok(t, 'file', 'push', setx, 'u2xattr/bin/setx', '--mode', '0755');
  await ok(t, 'exec', 'u2xattr', '--', 'sh', '-c', 'mkdir -p /tmp/d /tmp/u && chown 1000:1000 /tmp/u');
  const hostDir = (sub: string) => path.join(dir, 'storage-pools', 'default', 'containers', 'u2xattr', 'rootfs', 'tmp', sub);
  const opaque = (sub: string) => spawnSync('getfattr', ['--only-values', '-n', 'trusted.overlay.opaque', hostDir(sub)], { encoding: 'utf8' }).stdout;
  // Without interception the kernel refuses trusted.* in a user namespace.
  const before = await lxc(d.socket, 'exec', 'u2xattr', '--', 'setx', '/tmp/d', 'trusted.overlay.opaque', 'y');
  t.not(before.status, 0);
  t.regex(before.stderr, /Operation not permitted/);
  t.is(opaque('d'), '');
  await ok(t, 'stop', 'u2xattr', '--force');
  await ok(t, 'config', 'set', 'u2xattr', 'security.syscalls.intercept.setxattr=true');
  await ok(t, 'start', 'u2xattr');
  await ok(t, 'exec', 'u2xattr', '--', 'setx', '/tmp/d', 'trusted.overlay.opaque', 'y');
  t.is(opaque('d'), 'y', 'the mark is on the directory');
  // The owner of a directory may mark it; another user may not.
  await ok(t, 'exec', 'u2xattr', '--user', '1000', '--group', '1000', '--', 'setx', '/tmp/u', 'trusted.overlay.opaque', 'y');
  t.is(opaque('u'), 'y');
  await ok(t, 'exec', 'u2xattr', '--', 'sh', '-c', 'mkdir /tmp/u2 && chown 1000:1000 /tmp/u2');
  const other = await lxc(d.socket, 'exec', 'u2xattr', '--user', '1001', '--group', '1001', '--', 'setx', '/tmp/u2', 'trusted.overlay.opaque', 'y');
  t.not(other.status, 0);
  t.is(opaque('u2'), '');
  // Any other trusted attribute or value stays the kernel's answer.
  t.regex((await lxc(d.socket, 'exec', 'u2xattr', '--', 'setx', '/tmp/d', 'trusted.overlay.other', 'y')).stderr, /Operation not permitted/);
  t.regex((await lxc(d.socket, 'exec', 'u2xattr', '--', 'setx', '/tmp/d', 'trusted.overlay.opaque', 'n')).stderr, /Operation not permitted/);
  t.is(opaque('d'), 'y');
  await ok(t, 'delete', '--force', 'u2xattr');
});

test('instance-lxc names each syscall extension it claims in a test title', (t) => {
  const { claims, unnamed } = claimsNamed('instance-lxc');
  for (const name of ['container_syscall_filtering', 'container_syscall_filtering_allow_deny_syntax', 'seccomp_notify', 'container_syscall_intercept']) t.true(claims.includes(name), name);
  t.deepEqual(unnamed, []);
});

serial('the seccomp proxy ends with the daemon, and a new daemon starts it for the containers still running', async (t) => {
  t.true(proxyPids().length >= 1, 'a proxy runs before shutdown');
  t.is(JSON.parse(await ok(t, 'list', 'u2mknod', '--format', 'json'))[0]?.status, 'Running');
  await d.stop();
  await waitFor(() => proxyPids().length === 0, 5_000, 'no proxy left');
  t.deepEqual(proxyPids(), []);
  // The container outlived the daemon; the next daemon serves its monitor again.
  d = await startDaemon({ dir, plugins: 'edge' });
  await waitFor(() => proxyPids().length === 1, 10_000, 'the proxy at boot');
  await waitFor(proxyListening, 10_000, 'the proxy to listen');
  await mknodWorks('u2mknod', ['c', '1', '7'], 'mknod after the restart');
  await ok(t, 'delete', '--force', 'u2mknod');
  t.is(proxyPids().length, 1, 'the proxy stays for the daemon\'s life');
  await d.stop();
  await waitFor(() => proxyPids().length === 0, 5_000, 'no proxy left');
  t.deepEqual(proxyPids(), []);
});
