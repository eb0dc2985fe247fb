/**
 * The second part of syscall interception, through the real `lxc` client on real unprivileged
 * containers: sched_setscheduler done for the container's root (a realtime policy, on a pid of its
 * own namespace only), mount of the allowed file system types (an ext4 image on a loop device given
 * as a unix-block device, mounted inside, written, seen on the host), refused types and devices the
 * container cannot open, and hugetlbfs owned by the container's root.
 */
import test from 'ava';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, type Daemon } from '../helpers/daemon.js';
import { hasLxc, lxc, lxcOk } from '../helpers/clients.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { stopBusyboxDaemon } from '../helpers/busybox-daemon.js';
import { claimsNamed } from '../helpers/claims.js';
import { execOk } from '../helpers/intercept-diagnosis.js';

let d: Daemon;
let dir: string;
let image: BusyboxImage;
const loops: string[] = [];

/** lxc that must succeed; a failed exec says why liblxc could not reach the proxy, should that be the cause. */
const ok = async (t: any, ...args: string[]) => (args[0] === 'exec' ? (await execOk(t, d, args[1]!, ...args.slice(2))).stdout : lxcOk(t, d.socket, ...args));
const inside = (name: string, ...cmd: string[]) => lxc(d.socket, 'exec', name, '--', ...cmd);

const hasV1Devices = existsSync('/sys/fs/cgroup/devices/devices.list');
const hasMusl = spawnSync('musl-gcc', ['--version']).status === 0;
const hasHugetlbfs = readFileSync('/proc/filesystems', 'utf8').includes('\thugetlbfs');
const skip = !hasLxc() ? 'the lxc client is not installed' : !hasMusl ? 'musl-gcc is not installed' : undefined;

test.before(async () => {
  if (skip) return;
  // The full set of plugins: unix-block devices are not in the edge set.
  image = buildBusyboxImage('gzip');
  dir = mkdtempSync(path.join(tmpdir(), 'corral-w6-icpt-'));
  d = await startWithPool({ dir, plugins: 'full' });
  const imported = await lxc(d.socket, 'image', 'import', image.unified, '--alias', 'bb');
  if (imported.status !== 0) throw new Error(`image import failed: ${imported.stderr}`);
});

test.after.always(async () => {
  if (skip) return;
  await stopBusyboxDaemon({ d, dir, image });
  for (const loop of loops) spawnSync('losetup', ['-d', loop]);
});

const serial = skip ? test.serial.skip : test.serial;

/** A static program built with musl-gcc (musl's sched_setscheduler wrapper answers ENOSYS: the raw syscall is made). */
function schedProgram(): string {
  const src = path.join(dir, 'w6sched.c');
  writeFileSync(src, `#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
/* w6sched set <pid> <policy> <priority> | w6sched get <pid> (prints "policy priority") */
int main(int c, char **v) {
  if (c == 5 && !strcmp(v[1], "set")) {
    struct sched_param p = { .sched_priority = atoi(v[4]) };
    if (syscall(SYS_sched_setscheduler, atoi(v[2]), atoi(v[3]), &p) < 0) { perror("sched_setscheduler"); return 1; }
    return 0;
  }
  if (c == 3 && !strcmp(v[1], "get")) {
    struct sched_param p;
    long policy = syscall(SYS_sched_getscheduler, atoi(v[2]));
    if (policy < 0 || syscall(SYS_sched_getparam, atoi(v[2]), &p) < 0) { perror("sched_getscheduler"); return 1; }
    printf("%ld %d\\n", policy, p.sched_priority);
    return 0;
  }
  return 2;
}
`);
  const out = path.join(dir, 'w6sched');
  const built = spawnSync('musl-gcc', ['-static', '-Os', '-o', out, src], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`musl-gcc failed: ${built.stderr}`);
  return out;
}

/** Policy and realtime priority of a host process (fields 41 and 40 of /proc/<pid>/stat). */
function hostSched(pid: number): string {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ');
  return `${fields[38]} ${fields[37]}`;
}

/** Host pid of the container's process whose command line is exactly `argv`. */
function hostPidOf(argv: string[]): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8') === `${argv.join('\0')}\0`) return Number(entry);
    } catch { /* gone */ }
  }
  return undefined;
}

serial('container_syscall_intercept_sched_setscheduler: the container root gets a realtime policy for its own processes, only for pids of its namespace', async (t) => {
  await ok(t, 'launch', 'bb', 'w6sched');
  await ok(t, 'file', 'push', schedProgram(), 'w6sched/bin/w6sched', '--mode', '0755');
  // Without interception the kernel refuses a realtime policy in a user namespace.
  const before = await inside('w6sched', 'w6sched', 'set', '0', '1', '10');
  t.not(before.status, 0);
  t.regex(before.stderr, /Operation not permitted/);
  t.regex((await lxc(d.socket, 'config', 'set', 'w6sched', 'security.syscalls.intercept.sched_setscheduler=maybe')).stderr, /boolean/);
  await ok(t, 'stop', 'w6sched', '--force');
  await ok(t, 'config', 'set', 'w6sched', 'security.syscalls.intercept.sched_setscheduler=true');
  await ok(t, 'start', 'w6sched');
  t.regex(readFileSync(path.join(dir, 'containers', 'w6sched', 'seccomp.profile'), 'utf8'), /\nsched_setscheduler notify\n/);

  // pid 0: the caller itself (SCHED_FIFO = 1, priority 10).
  t.is((await ok(t, 'exec', 'w6sched', '--', 'sh', '-c', 'w6sched set 0 1 10 && echo done')).trim(), 'done');
  // Another process of the container, named by its pid inside: checked inside and on the host.
  const sleeper = spawn('lxc', ['exec', 'w6sched', '--', 'sleep', '4242'], { env: { ...process.env, LXD_SOCKET: d.socket }, stdio: 'ignore' });
  try {
    let hostPid: number | undefined;
    for (let i = 0; i < 100 && !(hostPid = hostPidOf(['sleep', '4242'])); i++) await new Promise((r) => setTimeout(r, 100));
    t.truthy(hostPid, 'the sleeper runs');
    const nsPid = readFileSync(`/proc/${hostPid}/status`, 'utf8').match(/\nNSpid:.*\s(\d+)\n/)![1]!;
    t.not(Number(nsPid), hostPid, 'a pid of the container\'s own namespace');
    t.is(hostSched(hostPid!), '0 0');
    await ok(t, 'exec', 'w6sched', '--', 'w6sched', 'set', nsPid, '2', '7');
    t.is((await ok(t, 'exec', 'w6sched', '--', 'w6sched', 'get', nsPid)).trim(), '2 7', 'SCHED_RR 7 inside');
    t.is(hostSched(hostPid!), '2 7', 'and on the host');
    await ok(t, 'exec', 'w6sched', '--', 'w6sched', 'set', nsPid, '0', '0');
    t.is(hostSched(hostPid!), '0 0');
    // A user other than the container's root gets the kernel's answer.
    const user = await lxc(d.socket, 'exec', 'w6sched', '--user', '1000', '--group', '1000', '--', 'w6sched', 'set', '0', '1', '10');
    t.not(user.status, 0);
    t.regex(user.stderr, /Operation not permitted/);
    // A host pid the container's namespace does not hold is no process for it: the host's is untouched.
    const host = spawn('sleep', ['4243'], { stdio: 'ignore' });
    try {
      const inContainer = (await ok(t, 'exec', 'w6sched', '--', 'sh', '-c', 'ls -d /proc/[0-9]* | wc -l')).trim();
      t.true(host.pid! > 1000 && Number(inContainer) < 100, 'the host pid is not one of the container\'s');
      const outside = await inside('w6sched', 'w6sched', 'set', String(host.pid), '1', '10');
      t.not(outside.status, 0);
      t.regex(outside.stderr, /No such process/);
      t.is(hostSched(host.pid!), '0 0');
    } finally {
      host.kill('SIGKILL');
    }
    // A bad policy keeps the kernel's error.
    t.regex((await inside('w6sched', 'w6sched', 'set', '0', '99', '1')).stderr, /Invalid argument/);
  } finally {
    sleeper.kill('SIGKILL');
    await lxc(d.socket, 'exec', 'w6sched', '--', 'killall', 'sleep');
  }
  await ok(t, 'delete', '--force', 'w6sched');
});

/** An ext4 image whose root directory belongs to `owner` (host ids), on a loop device. */
function ext4Loop(name: string, owner: string): { file: string; loop: string } {
  const file = path.join(dir, `${name}.img`);
  writeFileSync(file, Buffer.alloc(8 << 20));
  execFileSync('mkfs.ext4', ['-q', '-F', '-E', `root_owner=${owner}`, file]);
  const loop = execFileSync('losetup', ['--find', '--show', file], { encoding: 'utf8' }).trim();
  loops.push(loop);
  return { file, loop };
}

function detach(loop: string): void {
  spawnSync('losetup', ['-d', loop]);
  loops.splice(loops.indexOf(loop), 1);
}

serial('container_syscall_intercept_mount: an allowed file system type is mounted for the container from its own device (idmapped with mount.shift), others and devices it cannot open are refused', async (t) => {
  if (!hasV1Devices) return t.pass('no v1 devices cgroup on this host: unix-block devices are not hot-plugged here');
  await ok(t, 'init', 'bb', 'w6mnt');
  // Bad values are 400s, nothing stored; what is not done here is refused, not ignored.
  for (const [key, value, why] of [
    ['security.syscalls.intercept.mount.allowed', 'ext4,,xfs', /not a file system type name/],
    ['security.syscalls.intercept.mount.allowed', 'ext4 xfs', /not a file system type name/],
    ['security.syscalls.intercept.mount', 'maybe', /boolean/],
    ['security.syscalls.intercept.mount.shift', 'maybe', /boolean/],
    ['security.syscalls.intercept.mount.fuse', 'ext4=fuse2fs', /mounting through fuse is not available/],
    ['security.syscalls.intercept.bpf', 'maybe', /boolean/],
  ] as const) {
    const res = await d.request('PATCH', '/1.0/instances/w6mnt', { config: { [key]: value } });
    t.is(res.status, 400, `${key}=${value}`);
    t.regex(res.json.error, why);
  }
  t.is((await ok(t, 'config', 'get', 'w6mnt', 'security.syscalls.intercept.mount.allowed')).trim(), '');
  await ok(t, 'config', 'set', 'w6mnt', 'security.syscalls.intercept.mount.shift=false');
  await ok(t, 'start', 'w6mnt');
  // The host id of the container's root (the image's root directory is made its own).
  const current = JSON.parse(await ok(t, 'config', 'get', 'w6mnt', 'volatile.idmap.current'));
  const base = String(current.find((e: { Isuid: boolean; Nsid: number }) => e.Isuid && e.Nsid === 0).Hostid);
  t.regex(base, /^[1-9]\d*$/);
  const { file, loop } = ext4Loop('w6ext4', `${base}:${base}`);
  await ok(t, 'config', 'device', 'add', 'w6mnt', 'blk', 'unix-block', `source=${loop}`, 'path=/dev/w6blk');
  await ok(t, 'exec', 'w6mnt', '--', 'mkdir', '-p', '/mnt/a', '/mnt/b');
  // Without interception an unprivileged container cannot mount ext4.
  const before = await inside('w6mnt', 'mount', '-t', 'ext4', '/dev/w6blk', '/mnt/a');
  t.not(before.status, 0);
  t.regex(before.stderr, /permission denied|not permitted/i);

  await ok(t, 'stop', 'w6mnt', '--force');
  await ok(t, 'config', 'set', 'w6mnt', 'security.syscalls.intercept.mount=true', 'security.syscalls.intercept.mount.allowed=ext4');
  await ok(t, 'start', 'w6mnt');
  const profile = readFileSync(path.join(dir, 'containers', 'w6mnt', 'seccomp.profile'), 'utf8');
  t.regex(profile, /\nmount notify \[3,0,SCMP_CMP_MASKED_EQ,18446744070422410016\]\nfsopen errno 38\n/);

  // Mounted in the container's own mount namespace, written, unmounted inside: the file is on the image.
  await ok(t, 'exec', 'w6mnt', '--', 'mount', '-t', 'ext4', '/dev/w6blk', '/mnt/a');
  t.regex(await ok(t, 'exec', 'w6mnt', '--', 'cat', '/proc/self/mounts'), /^\/dev\/w6blk \/mnt\/a ext4 rw,nodev,/m);
  t.false(readFileSync('/proc/self/mounts', 'utf8').includes(loop), 'nothing mounted on the host');
  await ok(t, 'exec', 'w6mnt', '--', 'sh', '-c', 'echo written-inside > /mnt/a/w6file');
  t.is((await ok(t, 'exec', 'w6mnt', '--', 'stat', '-c', '%u:%g', '/mnt/a/w6file')).trim(), '0:0', 'the container root\'s file');
  await ok(t, 'exec', 'w6mnt', '--', 'umount', '/mnt/a');
  t.is(execFileSync('debugfs', ['-R', 'cat /w6file', loop], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }), 'written-inside\n');
  // Relative paths are the caller's (its cwd: the kernel keeps the source as given); the caller's flags are kept.
  await ok(t, 'exec', 'w6mnt', '--cwd', '/mnt', '--', 'mount', '-t', 'ext4', '-o', 'ro', '../dev/w6blk', 'b');
  t.regex(await ok(t, 'exec', 'w6mnt', '--', 'cat', '/proc/self/mounts'), /^\.\.\/dev\/w6blk \/mnt\/b ext4 ro,nodev,/m);
  t.regex((await inside('w6mnt', 'touch', '/mnt/b/x')).stderr, /Read-only file system/);
  await ok(t, 'exec', 'w6mnt', '--', 'umount', '/mnt/b');

  // A type not allowed goes to the kernel: refused.
  const btrfs = await inside('w6mnt', 'mount', '-t', 'btrfs', '/dev/w6blk', '/mnt/a');
  t.not(btrfs.status, 0);
  t.notRegex(await ok(t, 'exec', 'w6mnt', '--', 'cat', '/proc/self/mounts'), /\/mnt\/a/);
  // A user without CAP_SYS_ADMIN in the container gets what the kernel gives it.
  const user = await lxc(d.socket, 'exec', 'w6mnt', '--user', '1000', '--group', '1000', '--', 'mount', '-t', 'ext4', '/dev/w6blk', '/mnt/a');
  t.not(user.status, 0);
  // A node of a device the container was not given (made from the host): its device rules refuse it.
  const other = ext4Loop('w6other', `${base}:${base}`);
  const minor = Number(/loop(\d+)$/.exec(other.loop)![1]);
  const rootfs = path.join(dir, 'storage-pools', 'default', 'containers', 'w6mnt', 'rootfs');
  execFileSync('mknod', [path.join(rootfs, 'tmp', 'w6other'), 'b', '7', String(minor)]);
  execFileSync('chown', [`${base}:${base}`, path.join(rootfs, 'tmp', 'w6other')]);
  // The same kind of node for the device it was given works: what differs is the device, not the node.
  execFileSync('mknod', [path.join(rootfs, 'tmp', 'w6same'), 'b', '7', /loop(\d+)$/.exec(loop)![1]!]);
  execFileSync('chown', [`${base}:${base}`, path.join(rootfs, 'tmp', 'w6same')]);
  await ok(t, 'exec', 'w6mnt', '--', 'mount', '-t', 'ext4', '/tmp/w6same', '/mnt/a');
  await ok(t, 'exec', 'w6mnt', '--', 'umount', '/mnt/a');
  const notGiven = await inside('w6mnt', 'mount', '-t', 'ext4', '/tmp/w6other', '/mnt/a');
  t.not(notGiven.status, 0);
  t.regex(notGiven.stderr, /permission denied|not permitted/i);
  t.notRegex(await ok(t, 'exec', 'w6mnt', '--', 'cat', '/proc/self/mounts'), /\/mnt\/a/);

  // mount.shift: an image whose root belongs to the host's root (unmapped in the container) is idmapped to the container.
  const hostOwned = ext4Loop('w6shift', '0:0');
  await ok(t, 'config', 'device', 'add', 'w6mnt', 'shiftblk', 'unix-block', `source=${hostOwned.loop}`, 'path=/dev/w6shift');
  await ok(t, 'exec', 'w6mnt', '--', 'mount', '-t', 'ext4', '/dev/w6shift', '/mnt/a');
  t.is((await ok(t, 'exec', 'w6mnt', '--', 'stat', '-c', '%u:%g', '/mnt/a')).trim(), '65534:65534', 'unshifted: the host\'s root is nobody inside');
  t.regex((await inside('w6mnt', 'touch', '/mnt/a/x')).stderr, /Permission denied/);
  await ok(t, 'exec', 'w6mnt', '--', 'umount', '/mnt/a');
  await ok(t, 'stop', 'w6mnt', '--force');
  await ok(t, 'config', 'set', 'w6mnt', 'security.syscalls.intercept.mount.shift=true');
  await ok(t, 'start', 'w6mnt');
  await ok(t, 'exec', 'w6mnt', '--', 'mount', '-t', 'ext4', '/dev/w6shift', '/mnt/a');
  t.regex(await ok(t, 'exec', 'w6mnt', '--', 'cat', '/proc/self/mountinfo'), /\/mnt\/a rw,nodev,[^ ]*idmapped/);
  t.is((await ok(t, 'exec', 'w6mnt', '--', 'stat', '-c', '%u:%g', '/mnt/a')).trim(), '0:0', 'shifted: the container\'s root');
  await ok(t, 'exec', 'w6mnt', '--', 'sh', '-c', 'echo shifted > /mnt/a/w6shifted && chown 1000:1000 /mnt/a/w6shifted');
  await ok(t, 'exec', 'w6mnt', '--', 'umount', '/mnt/a');
  // On disk the ids are the container's own (0 and 1000), not the host ids they run as.
  t.regex(execFileSync('debugfs', ['-R', 'stat /w6shifted', hostOwned.loop], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }), /User:\s+1000\s+Group:\s+1000\s/);

  await ok(t, 'delete', '--force', 'w6mnt');
  detach(hostOwned.loop);
  rmSync(hostOwned.file, { force: true });
  detach(loop);
  detach(other.loop);
  rmSync(file, { force: true });
  rmSync(other.file, { force: true });
});

serial('container_syscall_intercept_hugetlbfs: hugetlbfs mounted through interception belongs to the container\'s root', async (t) => {
  if (!hasHugetlbfs) return t.pass('the kernel has no hugetlbfs');
  await ok(t, 'init', 'bb', 'w6huge', '-c', 'security.syscalls.intercept.mount=true', '-c', 'security.syscalls.intercept.mount.allowed=hugetlbfs');
  await ok(t, 'start', 'w6huge');
  await ok(t, 'exec', 'w6huge', '--', 'mkdir', '-p', '/mnt/huge', '/mnt/huge2');
  await ok(t, 'exec', 'w6huge', '--', 'mount', '-t', 'hugetlbfs', 'none', '/mnt/huge');
  t.is((await ok(t, 'exec', 'w6huge', '--', 'stat', '-c', '%u:%g', '/mnt/huge')).trim(), '0:0', 'owned by the container\'s root');
  await ok(t, 'exec', 'w6huge', '--', 'touch', '/mnt/huge/w6');
  await ok(t, 'exec', 'w6huge', '--', 'mkdir', '/mnt/huge/w6dir');
  // Ids given by the caller are its own: mapped to the host's.
  await ok(t, 'exec', 'w6huge', '--', 'mount', '-t', 'hugetlbfs', '-o', 'uid=1000,gid=1000,mode=0700', 'none', '/mnt/huge2');
  t.is((await ok(t, 'exec', 'w6huge', '--', 'stat', '-c', '%u:%g %a', '/mnt/huge2')).trim(), '1000:1000 700');
  await ok(t, 'exec', 'w6huge', '--', 'umount', '/mnt/huge2');
  await ok(t, 'exec', 'w6huge', '--', 'umount', '/mnt/huge');
  await ok(t, 'delete', '--force', 'w6huge');
});

/** A static program that loads a cgroup device program denying every device (or a socket filter) and attaches it to a cgroup. */
function bpfProgram(): string {
  const src = path.join(dir, 'w6bpf.c');
  writeFileSync(src, `#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
struct insn { uint8_t code; uint8_t regs; int16_t off; int32_t imm; };
/* w6bpf device [<cgroup dir>] | w6bpf socket */
int main(int c, char **v) {
  struct insn prog[2] = { { 0xb7, 0, 0, 0 } /* r0 = 0: deny */, { 0x95, 0, 0, 0 } /* exit */ };
  uint8_t attr[128];
  memset(attr, 0, sizeof(attr));
  int device = c >= 2 && !strcmp(v[1], "device");
  *(uint32_t *)(attr + 0) = device ? 15 : 1; /* BPF_PROG_TYPE_CGROUP_DEVICE or _SOCKET_FILTER */
  *(uint32_t *)(attr + 4) = 2;
  *(uint64_t *)(attr + 8) = (uintptr_t)prog;
  *(uint64_t *)(attr + 16) = (uintptr_t)"GPL";
  int fd = syscall(SYS_bpf, 5 /* BPF_PROG_LOAD */, attr, 72);
  if (fd < 0) { perror("bpf load"); return 1; }
  printf("loaded\\n");
  if (c != 3) return 0;
  int cg = open(v[2], O_RDONLY | O_DIRECTORY);
  if (cg < 0) { perror("open"); return 1; }
  memset(attr, 0, sizeof(attr));
  *(uint32_t *)(attr + 0) = cg;
  *(uint32_t *)(attr + 4) = fd;
  *(uint32_t *)(attr + 8) = 6; /* BPF_CGROUP_DEVICE */
  if (syscall(SYS_bpf, 8 /* BPF_PROG_ATTACH */, attr, 16) < 0) { perror("bpf attach"); return 1; }
  printf("attached\\n");
  return 0;
}
`);
  const out = path.join(dir, 'w6bpf');
  const built = spawnSync('musl-gcc', ['-static', '-Os', '-o', out, src], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`musl-gcc failed: ${built.stderr}`);
  return out;
}

serial('container_syscall_intercept_bpf_devices: a cgroup device program is loaded and attached for the container to its own cgroup and denies there, other programs are the kernel\'s', async (t) => {
  await ok(t, 'launch', 'bb', 'w6bpf');
  await ok(t, 'file', 'push', bpfProgram(), 'w6bpf/bin/w6bpf', '--mode', '0755');
  // Without interception an unprivileged container loads no bpf program.
  t.regex((await inside('w6bpf', 'w6bpf', 'device')).stderr, /bpf load: Operation not permitted/);
  await ok(t, 'stop', 'w6bpf', '--force');
  await ok(t, 'config', 'set', 'w6bpf', 'security.syscalls.intercept.bpf=true', 'security.syscalls.intercept.bpf.devices=true');
  await ok(t, 'start', 'w6bpf');
  t.regex(readFileSync(path.join(dir, 'containers', 'w6bpf', 'seccomp.profile'), 'utf8'), /\nbpf notify \[0,5,SCMP_CMP_EQ\]\nbpf notify \[0,8,SCMP_CMP_EQ\]\nbpf notify \[0,9,SCMP_CMP_EQ\]\n/);
  // The container's own cgroup tree (its cgroup namespace), a cgroup for the program and one without.
  await ok(t, 'exec', 'w6bpf', '--', 'sh', '-c', 'mkdir -p /tmp/cg && mount -t cgroup2 none /tmp/cg && mkdir /tmp/cg/w6deny /tmp/cg/w6open');
  t.is((await ok(t, 'exec', 'w6bpf', '--', 'w6bpf', 'device', '/tmp/cg/w6deny')).trim(), 'loaded\nattached');
  const denied = await inside('w6bpf', 'sh', '-c', 'echo $$ > /tmp/cg/w6deny/cgroup.procs && echo x > /dev/null');
  t.not(denied.status, 0);
  t.regex(denied.stderr, /Operation not permitted/);
  await ok(t, 'exec', 'w6bpf', '--', 'sh', '-c', 'echo $$ > /tmp/cg/w6open/cgroup.procs && echo x > /dev/null');
  // Any other program type is the kernel's to refuse.
  t.regex((await inside('w6bpf', 'w6bpf', 'socket')).stderr, /bpf load: Operation not permitted/);
  // bpf intercepted without bpf.devices serves nothing.
  await ok(t, 'stop', 'w6bpf', '--force');
  await ok(t, 'config', 'set', 'w6bpf', 'security.syscalls.intercept.bpf.devices=false');
  await ok(t, 'start', 'w6bpf');
  t.regex((await inside('w6bpf', 'w6bpf', 'device')).stderr, /bpf load: Operation not permitted/);
  await ok(t, 'delete', '--force', 'w6bpf');
});

test('instance-lxc names each interception extension it claims in a test title', (t) => {
  const { claims, unnamed } = claimsNamed('instance-lxc');
  for (const name of ['container_syscall_intercept_sched_setscheduler', 'container_syscall_intercept_mount', 'container_syscall_intercept_hugetlbfs', 'container_syscall_intercept_bpf_devices']) t.true(claims.includes(name), name);
  t.false(claims.includes('container_syscall_intercept_mount_fuse'), 'fuse mounts are not done');
  t.deepEqual(unnamed, []);
});
