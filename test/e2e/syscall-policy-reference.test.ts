/**
 * The reference daemon as oracle for the syscall policy (container_syscall_filtering,
 * container_syscall_intercept): the profile it writes for a container with the same
 * security.syscalls.* keys is the one corral writes (comments and spacing aside), a denied syscall
 * kills the caller with SIGSYS, and an intercepted mknod of a device outside the list is EPERM.
 */
import test from 'ava';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../helpers/reference-daemon.js';
import { seccompProfile } from '../../plugins/instance-lxc/seccomp-profile.js';

const unavailable = referenceUnavailable();
let ref: ReferenceDaemon;
let image: BusyboxImage;

test.before(async () => {
  if (unavailable) return;
  image = buildBusyboxImage('gzip');
  ref = await startReference();
  const imported = await ref.lxc('image', 'import', image.unified, '--alias', 'bb');
  if (imported.status !== 0) throw new Error(`image import failed: ${imported.stderr}`);
});

test.after.always(async () => {
  if (unavailable) return;
  await ref?.stop();
  if (image) rmSync(image.dir, { recursive: true, force: true });
});

const serial = unavailable ? test.serial.skip : test.serial;

/**
 * `lxc exec` on the reference. Its exec now and then fails to start the command at all on a loaded host
 * ("Failed to retrieve PID of executing child process"): that is asked again, a bounded number of times.
 */
async function referenceExec(instance: string, ...command: string[]): Promise<Awaited<ReturnType<ReferenceDaemon['lxc']>>> {
  let result = await ref.lxc('exec', instance, '--', ...command);
  for (let retry = 0; retry < 3 && /Failed to retrieve PID of executing child process/.test(result.stderr); retry++) {
    result = await ref.lxc('exec', instance, '--', ...command);
  }
  return result;
}

const CASES: Record<string, Record<string, string>> = {
  u2rdefault: {},
  u2rdeny: { 'security.syscalls.deny': 'mkdir\nchroot' },
  u2rnodefault: { 'security.syscalls.deny_default': 'false', 'security.syscalls.deny': 'chroot' },
  u2rintercept: { 'security.syscalls.intercept.mknod': 'true', 'security.syscalls.intercept.setxattr': 'true' },
  u2rcompat: { 'security.syscalls.deny_compat': 'true', 'security.syscalls.deny': 'chroot', 'security.syscalls.intercept.mknod': 'true' },
  u2rallow: { 'security.syscalls.allow': 'read\nwrite' },
  u2rmount: {
    'security.syscalls.intercept.mknod': 'true', 'security.syscalls.intercept.sched_setscheduler': 'true', 'security.syscalls.intercept.setxattr': 'true',
    'security.syscalls.intercept.mount': 'true', 'security.syscalls.intercept.mount.allowed': 'ext4,hugetlbfs', 'security.syscalls.intercept.bpf': 'true', 'security.syscalls.deny': 'chroot',
  },
};

serial('container_syscall_filtering, container_syscall_intercept, container_syscall_intercept_mount, container_syscall_intercept_sched_setscheduler and container_syscall_intercept_bpf_devices: the reference writes the same seccomp profile and answers mknod the same', async (t) => {
  for (const [name, config] of Object.entries(CASES)) {
    const made = await ref.lxc('init', 'bb', name, ...Object.entries(config).flatMap(([k, v]) => ['-c', `${k}=${v}`]));
    t.is(made.status, 0, made.stderr);
    // The profile is written before liblxc runs: an allow list this short starts nothing.
    const started = await ref.lxc('start', name);
    if (name !== 'u2rallow') t.is(started.status, 0, started.stderr);
    const theirs = readFileSync(path.join(ref.dir, 'security', 'seccomp', name), 'utf8');
    const ours = seccompProfile(config, 'x86_64') ?? '';
    // Same lines in the same order; the reference's own spacing and comments aside.
    const lines = (text: string) => text.split('\n').map((l) => l.replace(/#.*$/, '').trim()).filter(Boolean);
    t.deepEqual(lines(ours), lines(theirs), name);
  }
  // A denied syscall kills the caller (SIGSYS): 128 + 31.
  const denied = await referenceExec('u2rdeny', 'sh', '-c', 'mkdir /y; echo rc=$?');
  t.is(denied.stdout.trim(), 'rc=159');
  // A device outside the list in the reference's unprivileged container: EPERM, as corral answers.
  // (Its own mknod of c 1:3 fails on these hosts, so that answer is not compared.)
  const block = await referenceExec('u2rintercept', 'mknod', '/tmp/b', 'b', '7', '0');
  t.not(block.status, 0);
  t.regex(block.stderr, /Operation not permitted/);
  for (const name of Object.keys(CASES)) await ref.lxc('delete', '--force', name);
});
