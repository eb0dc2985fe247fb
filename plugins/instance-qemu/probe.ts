/**
 * What the host's QEMU is and which accelerator VMs get. KVM is used only when a real kernel
 * boots under it: on some hosts `/dev/kvm` exists but a guest kernel hangs under it. The probe
 * boots a kernel without an initrd (`panic=-1 -no-reboot`): it panics at once when it cannot
 * mount a root, and QEMU exits, which proves the boot. No exit within the deadline: TCG.
 */
import { constants } from 'node:fs';
import { access, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { release } from 'node:os';
import path from 'node:path';
import { runRemembered, type HostTools } from '../../sdk/index.js';

export const QEMU = 'qemu-system-x86_64';
export type Accelerator = 'kvm' | 'tcg';

export interface QemuProbe {
  operational: boolean;
  reason?: string;
  /** `7.2.5`... */
  version: string;
}

const PROBE_DEADLINE_MS = 8_000;

export async function probeQemu(hostTools: HostTools): Promise<QemuProbe> {
  try {
    const out = (await runRemembered(hostTools, QEMU, ['--version'], { timeoutMs: 10_000 })).stdout;
    const version = /version (\S+)/.exec(out)?.[1] ?? out.split('\n')[0]!.trim();
    return { operational: true, version };
  } catch (err) {
    return { operational: false, reason: `${QEMU} does not run: ${(err as Error).message}`, version: '' };
  }
}

/** A kernel of the host's own (`/boot/vmlinuz*`) to probe with, if there is one. */
export async function hostKernel(): Promise<string | undefined> {
  const entries = await readdir('/boot').catch(() => [] as string[]);
  const name = entries.filter((e) => /^vmlinuz/.test(e)).sort().pop();
  return name ? path.join('/boot', name) : undefined;
}

export interface AcceleratorVerdict {
  accelerator: Accelerator;
  /** Why not KVM. */
  reason?: string;
}

/** Boots `kernel` under KVM with a deadline. */
export async function probeKvm(hostTools: HostTools, kernel: string | undefined): Promise<AcceleratorVerdict> {
  const usable = await access('/dev/kvm', constants.R_OK | constants.W_OK).then(() => true, () => false);
  if (!usable) return { accelerator: 'tcg', reason: '/dev/kvm is not available' };
  if (!kernel) return { accelerator: 'tcg', reason: 'no kernel to probe KVM with yet' };
  const started = Date.now();
  const result = await hostTools.run(QEMU, [
    '-nodefaults', '-no-user-config', '-machine', 'q35,accel=kvm', '-m', '128M', '-display', 'none',
    '-kernel', kernel, '-append', 'console=ttyS0 panic=-1 quiet', '-no-reboot', '-serial', 'none',
  ], { timeoutMs: PROBE_DEADLINE_MS, allowFailure: true, endWithDaemon: true }).catch(() => undefined);
  if (!result) return { accelerator: 'tcg', reason: `a kernel did not boot under KVM within ${PROBE_DEADLINE_MS} ms` };
  if (result.exitCode !== 0) return { accelerator: 'tcg', reason: `QEMU refused KVM: ${result.stderr.trim().split('\n').pop() ?? ''}` };
  return { accelerator: 'kvm', reason: `probe boot took ${Date.now() - started} ms` };
}

/**
 * The `environment` contribution: `driver` and `driver_version` join the operational drivers
 * with " | ", as the reference does.
 */
export function qemuEnvironment(probe: () => QemuProbe | undefined) {
  return (env: Record<string, unknown>): Record<string, unknown> => {
    const p = probe();
    if (!p?.operational) return env;
    const join = (existing: unknown, value: string) => (typeof existing === 'string' && existing !== '' ? `${existing} | ${value}` : value);
    return { ...env, driver: join(env.driver, 'qemu'), driver_version: join(env.driver_version, p.version) };
  };
}

/**
 * A verdict is kept in the data directory for the next boots on the same host kernel and QEMU
 * (a probe on a host where KVM hangs costs its whole deadline of CPU).
 */
interface StoredVerdict extends AcceleratorVerdict {
  qemu: string;
  hostKernel: string;
}

export async function storedVerdict(file: string, qemuVersion: string): Promise<AcceleratorVerdict | undefined> {
  try {
    const v = JSON.parse(await readFile(file, 'utf8')) as StoredVerdict;
    if (v.qemu !== qemuVersion || v.hostKernel !== release() || (v.accelerator !== 'kvm' && v.accelerator !== 'tcg')) return undefined;
    return { accelerator: v.accelerator, reason: `${(v.reason ?? '').replace(/ \(probed before\)$/, '')} (probed before)`.trim() };
  } catch {
    return undefined;
  }
}

export async function storeVerdict(file: string, qemuVersion: string, verdict: AcceleratorVerdict): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const stored: StoredVerdict = { ...verdict, qemu: qemuVersion, hostKernel: release() };
  await writeFile(file, `${JSON.stringify(stored)}\n`);
}
