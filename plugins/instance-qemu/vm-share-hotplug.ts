/**
 * Shares plugged into a running VM. QMP cannot make a 9p fsdev on a running QEMU, so each VM
 * starts with a few spare fsdevs, each rooted at an empty directory of its run directory; a
 * hot-plugged share bind-mounts its source on the host under that directory (`data`, a lookup
 * below the fsdev's root crosses the mount), then a `virtio-9p-pci` card with the share's tag
 * plugs in on a spare root port, and the agent mounts it in the guest. Unplugging undoes it in
 * reverse: the guest's unmount through the agent, `device_del`, the host's unmount. The host
 * mounts are recorded (`hotshares.json`) so a stop or the boot cleanup after a crash releases them,
 * and a run directory is never removed while something is mounted under it.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, internalError, type HostTools } from '../../sdk/index.js';
import type { GuestAgent } from './agent/contract.js';
import { section, type ConfigSection } from './qemu-config.js';
import type { QmpClient } from './qmp.js';
import type { RunDir } from './run-dir.js';
import type { Supervised } from './supervision.js';
import { qemuIdOf, unplugCard } from './vm-disks.js';
import type { Share } from './vm-shares.js';

export const SPARE_SHARES = 2;
const GUEST_TIMEOUT_MS = 15_000;
const QMP_TIMEOUT_MS = 10_000;
/** Where the guest mounts a hot-plugged share before binding its `data` to the device's path. */
const GUEST_STAGING = '/run/corral-shares';

export interface HotShare extends Share {
  spare: number;
  port: string;
}

const spareRoot = (run: RunDir, n: number) => path.join(run.dir, 'spares', String(n));
const spareMount = (run: RunDir, n: number) => path.join(spareRoot(run, n), 'data');
const spareId = (n: number) => `spare-share${n}`;
const hotFile = (run: RunDir) => path.join(run.dir, 'hotshares.json');
export const shareCardId = (device: string) => `dev-share-${qemuIdOf(device)}`;

export function readHotShares(run: RunDir): HotShare[] {
  try {
    return JSON.parse(readFileSync(hotFile(run), 'utf8')) as HotShare[];
  } catch {
    return [];
  }
}

const writeHotShares = (run: RunDir, shares: HotShare[]) => writeFile(hotFile(run), JSON.stringify(shares));

/** The spare fsdevs of a VM's config (their empty roots are made here). */
export function spareShareSections(run: RunDir): ConfigSection[] {
  return Array.from({ length: SPARE_SHARES }, (_, n) => {
    mkdirSync(spareMount(run, n), { recursive: true, mode: 0o755 });
    return section('fsdev', spareId(n), { fsdriver: 'local', path: spareRoot(run, n), security_model: 'passthrough' });
  });
}

/** Runs `command` in the guest through the agent; resolves with its exit code and stderr, bounded. */
async function guestRun(agent: GuestAgent, command: string[]): Promise<{ code: number; stderr: string }> {
  const session = await agent.exec({ command, environment: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }, interactive: false });
  let stderr = '';
  session.stdout.resume();
  session.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  session.stdin.end();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      session.terminate();
      reject(new Error(`"${command.join(' ')}" took longer than ${GUEST_TIMEOUT_MS} ms in the guest`));
    }, GUEST_TIMEOUT_MS);
  });
  try {
    return { code: await Promise.race([session.exited, timeout]), stderr: stderr.trim() };
  } finally {
    clearTimeout(timer);
  }
}

async function hostUnmount(tools: HostTools, target: string): Promise<void> {
  const r = await tools.run('umount', [target], { timeoutMs: 10_000, allowFailure: true });
  // Busy (QEMU still had a file open): detach it; nothing new can reach it through the share.
  if (r.exitCode !== 0 && isMounted(target)) await tools.run('umount', ['-l', target], { timeoutMs: 10_000, allowFailure: true });
}

/** Mount points at or under `dir` in this mount namespace. */
export function mountsUnder(dir: string): string[] {
  try {
    return readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
      .map((l) => l.split(' ')[4]?.replace(/\\040/g, ' ') ?? '')
      .filter((m) => m === dir || m.startsWith(`${dir}/`));
  } catch {
    return [];
  }
}

const isMounted = (target: string) => mountsUnder(target).includes(target);

/** Plugs `share` into the running VM; every step is undone when a later one fails. */
export async function plugShare(
  tools: HostTools, run: RunDir, qmp: QmpClient, vm: Supervised, agent: GuestAgent | undefined, share: Share, freePort: () => string | undefined,
): Promise<void> {
  if (!agent?.connected) throw badRequest(`Device "${share.device}" cannot be added while the VM agent isn't running (the guest mounts it through the agent)`);
  const held = readHotShares(run);
  const spare = Array.from({ length: SPARE_SHARES }, (_, n) => n).find((n) => !held.some((h) => h.spare === n));
  if (spare === undefined) throw badRequest(`No free slot for device "${share.device}": a running VM takes ${SPARE_SHARES} hot-plugged shares at most (restart it to give it more)`);
  const port = freePort();
  if (!port) throw badRequest(`No free slot for device "${share.device}": the VM's spare ports are taken`);
  const target = spareMount(run, spare);
  await mkdir(target, { recursive: true });
  const undo: (() => Promise<unknown>)[] = [];
  try {
    const bind = await tools.run('mount', ['--bind', share.source, target], { timeoutMs: 10_000, allowFailure: true });
    if (bind.exitCode !== 0) throw internalError(`Failed to share "${share.source}": ${bind.stderr.trim()}`);
    undo.push(() => hostUnmount(tools, target));
    if (share.readonly) {
      const ro = await tools.run('mount', ['-o', 'remount,bind,ro', target], { timeoutMs: 10_000, allowFailure: true });
      if (ro.exitCode !== 0) throw internalError(`Failed to make the share of "${share.source}" read-only: ${ro.stderr.trim()}`);
    }
    await qmp.execute('device_add', { driver: 'virtio-9p-pci', id: shareCardId(share.device), fsdev: spareId(spare), mount_tag: share.tag, bus: port }, QMP_TIMEOUT_MS);
    undo.push(() => unplugCard(vm, qmp, shareCardId(share.device), GUEST_TIMEOUT_MS));
    const staging = `${GUEST_STAGING}/${share.tag}`;
    // The guest binds the new card's driver a moment after device_add: its tag shows in sysfs then.
    const mounted = await guestRun(agent, ['sh', '-c', [
      'seen() { for f in /sys/bus/virtio/drivers/9pnet_virtio/virtio*/mount_tag; do [ "$(tr -d "\\000" < "$f" 2>/dev/null)" = "$1" ] && return 0; done; return 1; }',
      'n=0; until seen "$4"; do n=$((n+1)); [ $n -gt 100 ] && echo "the card did not show up" >&2 && exit 1; sleep 0.1; done',
      'mkdir -p "$1" "$2" && mount -t 9p -o "trans=virtio,version=9p2000.L,msize=262144,$3" "$4" "$1" && mount --bind "$1/data" "$2"',
    ].join('\n'),
      'mount-share', staging, share.target, share.readonly ? 'ro' : 'rw', share.tag]);
    if (mounted.code !== 0) throw badRequest(`Device "${share.device}": the guest could not mount it at "${share.target}": ${mounted.stderr || `exit ${mounted.code}`}`);
    await writeHotShares(run, [...held, { ...share, spare, port }]);
  } catch (err) {
    for (const step of undo.reverse()) await step().catch(() => undefined);
    throw err;
  }
}

/** Takes a hot-plugged share out: the guest lets go first (a busy mount refuses with a 400). */
export async function unplugShare(tools: HostTools, run: RunDir, qmp: QmpClient, vm: Supervised, agent: GuestAgent | undefined, share: HotShare): Promise<void> {
  if (!agent?.connected) throw badRequest(`Device "${share.device}" cannot be removed while the VM agent isn't running (the guest must unmount it first)`);
  const staging = `${GUEST_STAGING}/${share.tag}`;
  const unmounted = await guestRun(agent, ['sh', '-c', 'for m in "$1" "$2"; do if grep -q " $m " /proc/mounts; then umount "$m" || exit 1; fi; done', 'umount-share', share.target, staging]);
  if (unmounted.code !== 0) throw badRequest(`Device "${share.device}" is in use in the guest: ${unmounted.stderr || 'it could not be unmounted'}`);
  await unplugCard(vm, qmp, shareCardId(share.device), GUEST_TIMEOUT_MS).catch((err: Error) => {
    throw internalError(`Failed to remove device "${share.device}": ${err.message}`);
  });
  await hostUnmount(tools, spareMount(run, share.spare));
  await writeHotShares(run, readHotShares(run).filter((s) => s.device !== share.device));
}

/** After the VM stopped (or at the boot cleanup): the host mounts of its hot-plugged shares go. */
export async function releaseHotShares(tools: HostTools, run: RunDir): Promise<void> {
  for (const n of Array.from({ length: SPARE_SHARES }, (_, i) => i)) {
    if (isMounted(spareMount(run, n))) await hostUnmount(tools, spareMount(run, n));
  }
  await writeHotShares(run, []).catch(() => undefined);
}
