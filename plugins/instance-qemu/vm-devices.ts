/**
 * Devices a VM can take now: its root disk, NICs and the `none` placeholder. Host paths and
 * custom volumes need a 9p or block path into the guest, and host character/block devices,
 * GPUs, USB and the like need passthrough: refused with a 400 when the instance is created or
 * edited, rather than failing at start.
 */
import type { DeviceConfig } from '../../sdk/index.js';

const ACCEPTED = new Set(['nic', 'none']);
/**
 * NIC kinds a VM takes: a tap on a bridge, a macvtap on a parent (a managed network's NIC is
 * checked at start, when its kind is known).
 */
const VM_NICTYPES = new Set(['bridged', 'macvlan']);

export function refusedDevice(config: DeviceConfig): string | undefined {
  const type = config.type ?? '';
  if (type === 'disk') {
    if (config.path === '/' && !config.source) return undefined;
    return 'disks other than the root disk (host paths, custom volumes) are not supported on virtual machines yet';
  }
  if (type === 'nic' && config.nictype && !VM_NICTYPES.has(config.nictype)) {
    return `nictype "${config.nictype}" is not supported on virtual machines yet (use a bridged or macvlan NIC)`;
  }
  if (ACCEPTED.has(type)) return undefined;
  return `"${type}" devices are not supported on virtual machines`;
}
