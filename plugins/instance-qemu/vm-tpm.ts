/**
 * A VM's TPM (`tpm` device): a swtpm process per VM, emulating a TPM 2.0 whose state lives in
 * the instance's volume (`tpm/`), so it survives restarts and goes with copies and moves. QEMU
 * reaches it over a unix socket in the run directory and shows the guest a `tpm-crb` device.
 * swtpm daemonizes like QEMU and writes its pid file; `--terminate` makes it end with QEMU's
 * link, and a stop or cleanup ends whatever is left, so a daemon restart adopts it with its VM.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, internalError, type DeviceConfig, type DeviceType, type HostTools } from '../../sdk/index.js';
import { section, type ConfigSection } from './qemu-config.js';
import type { RunDir } from './run-dir.js';

export const SWTPM = 'swtpm';
const SOCKET_WAIT_MS = 5_000;
const EXIT_WAIT_MS = 3_000;

export const tpmSocket = (run: RunDir) => path.join(run.dir, 'tpm.sock');
const tpmPidFile = (run: RunDir) => path.join(run.dir, 'swtpm.pid');
export const tpmStateDir = (volumePath: string) => path.join(volumePath, 'tpm');

const onPath = (tool: string) => (process.env.PATH ?? '').split(':').some((dir) => dir && existsSync(path.join(dir, tool)));

/** The VM's `tpm` device, if it has one (a VM takes one at most). */
export function tpmDeviceOf(devices: Record<string, DeviceConfig>): string | undefined {
  const names = Object.entries(devices).filter(([, d]) => d.type === 'tpm').map(([n]) => n);
  if (names.length > 1) throw badRequest(`Only one TPM device is allowed: "${names.join('", "')}"`);
  return names[0];
}

/** The `tpm` device type: it asks nothing of the host at device level; the QEMU driver makes it. */
export const tpmDevice: DeviceType = {
  type: 'tpm',
  validate(config, ctx) {
    for (const key of Object.keys(config)) {
      if (key !== 'type' && key !== 'path' && key !== 'pathrm') throw new Error(`unknown option "${key}"`);
    }
    if (ctx.instanceType === 'container') throw new Error('TPM devices are for virtual machines in this build');
    if (!onPath(SWTPM)) throw new Error('TPM devices need swtpm on this host (scripts/install.sh installs it)');
  },
  async start() {
    return {};
  },
};

/** swtpm of `run`, when its pid file names a live swtpm serving this VM's socket. */
export function livePidOfTpm(run: RunDir): number | undefined {
  try {
    const pid = Number(readFileSync(tpmPidFile(run), 'utf8').trim());
    if (!Number.isInteger(pid) || pid <= 1) return undefined;
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    if (!cmdline.some((a) => a.includes(tpmSocket(run)))) return undefined;
    return /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8')) ? undefined : pid;
  } catch {
    return undefined;
  }
}

/** Starts the VM's swtpm (state in `stateDir`) and waits for its socket; a failure leaves nothing. */
export async function startTpm(tools: HostTools, run: RunDir, stateDir: string, log: string): Promise<void> {
  await stopTpm(run);
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  const r = await tools.run(SWTPM, [
    'socket', '--tpm2', '--tpmstate', `dir=${stateDir}`, '--ctrl', `type=unixio,path=${tpmSocket(run)}`,
    '--log', `file=${log}`, '--pid', `file=${tpmPidFile(run)}`, '--daemon', '--terminate',
  ], { timeoutMs: SOCKET_WAIT_MS, allowFailure: true });
  if (r.exitCode !== 0) {
    await stopTpm(run);
    throw internalError(`Failed to start the TPM emulator (swtpm): ${r.stderr.trim() || `exit ${r.exitCode}`}`);
  }
  const deadline = Date.now() + SOCKET_WAIT_MS;
  while (!existsSync(tpmSocket(run))) {
    if (Date.now() > deadline) {
      await stopTpm(run);
      throw internalError('Failed to start the TPM emulator: its socket did not appear');
    }
    await new Promise((res) => setTimeout(res, 20));
  }
}

/** Ends the VM's swtpm if it still runs (it normally ends with QEMU) and removes its socket. */
export async function stopTpm(run: RunDir): Promise<void> {
  const pid = livePidOfTpm(run);
  if (pid !== undefined) {
    try { process.kill(pid, 'SIGTERM'); } catch { /* gone */ }
    const deadline = Date.now() + EXIT_WAIT_MS;
    while (livePidOfTpm(run) !== undefined && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
    if (livePidOfTpm(run) !== undefined) {
      try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    }
  }
  await rm(tpmSocket(run), { force: true });
  await rm(tpmPidFile(run), { force: true });
}

export function tpmSections(run: RunDir): ConfigSection[] {
  return [
    section('chardev', 'tpm', { backend: 'socket', path: tpmSocket(run) }),
    section('tpmdev', 'tpm0', { type: 'emulator', chardev: 'tpm' }),
    section('device', 'dev-tpm', { driver: 'tpm-crb', tpmdev: 'tpm0' }),
  ];
}
