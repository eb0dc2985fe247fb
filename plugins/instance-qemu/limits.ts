/**
 * `limits.cpu` and `limits.memory` as a VM takes them: a count of vCPUs (a list of host CPUs
 * gives one vCPU each) and the guest's RAM. A VM's memory is fixed at start, so a percentage is
 * of the host's memory then. The defaults are the reference's: 1 vCPU and 1 GiB.
 */
import { totalmem } from 'node:os';
import { isBool, parseCpuSet, parseSize, type ConfigKeyDescriptor } from '../../sdk/index.js';

export const DEFAULT_MEMORY = 1024 * 1024 * 1024;

export function vcpus(value: string | undefined): number {
  if (!value) return 1;
  if (/^\d+$/.test(value)) {
    const n = Number(value);
    if (n < 1 || n > 288) throw new Error(`a VM takes 1 to 288 vCPUs, got ${n}`);
    return n;
  }
  // A set of host CPUs gives one vCPU each.
  const count = parseCpuSet(value).length;
  if (count > 288) throw new Error(`a VM takes 1 to 288 vCPUs, the CPU set "${value}" names ${count}`);
  return count;
}

/** Guest RAM in MiB. */
export function memoryMiB(value: string | undefined): number {
  let bytes = DEFAULT_MEMORY;
  if (value) {
    const pct = /^(\d+(?:\.\d+)?)%$/.exec(value);
    bytes = pct ? Math.floor((totalmem() * Number(pct[1])) / 100) : parseSize(value);
  }
  const mib = Math.floor(bytes / (1024 * 1024));
  if (mib < 32) throw new Error(`a VM needs at least 32MiB of memory, got "${value}"`);
  return mib;
}

const checkBool = (v: string) => void isBool(v);

/** Keys only VMs use; limits.* are shared with containers and registered once by whichever driver comes first. */
export const QEMU_KEYS: ConfigKeyDescriptor[] = [
  { key: 'security.secureboot', scope: 'instance', type: 'bool', default: 'true', validate: checkBool, doc: 'VM: boot through UEFI with secure boot on (OVMF\'s secure boot firmware)' },
  { key: 'security.csm', scope: 'instance', type: 'bool', default: 'false', validate: checkBool, doc: 'VM: boot through legacy BIOS (SeaBIOS) instead of UEFI' },
  { key: 'security.agent.metrics', scope: 'instance', type: 'bool', default: 'true', validate: checkBool, live: true, extension: 'qemu_metrics', doc: 'VM: ask the guest agent for the state and metrics figures (false: from QEMU and the host only)' },
  { key: 'raw.qemu', scope: 'instance', type: 'string', doc: 'VM: extra QEMU command line arguments (checked by QEMU when set)' },
  { key: 'raw.qemu.conf', scope: 'instance', type: 'string', doc: 'VM: overrides of the generated QEMU config file, by [section "name"]' },
  { key: 'limits.cpu', scope: 'instance', type: 'string', live: true, validate: (v) => void vcpus(v), doc: 'Number of CPUs, or a list of CPU ids and ranges (0-1,3)' },
  { key: 'limits.memory', scope: 'instance', type: 'string', live: true, validate: (v) => void (/%$/.test(v) || parseSize(v)), doc: 'Memory limit: bytes with an optional unit (kB, MB, GB, KiB, MiB, GiB...) or a percentage of the host\'s memory' },
];
