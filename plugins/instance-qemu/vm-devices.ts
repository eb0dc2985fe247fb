/**
 * Devices a VM can take: its root disk, other disks (block volumes and image files as virtio
 * disks, host directories and filesystem volumes as 9p shares), NICs and the `none`
 * placeholder, a TPM (swtpm). Host hardware types (usb, gpu, pci, infiniband) pass: their own
 * type validates them for VMs and refuses a start it cannot serve. What only a container can use
 * (host character/block devices; id shifting and mount propagation are mount-namespace notions) is
 * refused with a 400 when the instance is created or edited, or a profile it uses is, rather
 * than failing at start.
 */
import type { DeviceConfig } from '../../sdk/index.js';

const ACCEPTED = new Set(['nic', 'none', 'disk', 'tpm', 'usb', 'gpu', 'pci', 'infiniband']);
/**
 * NIC kinds a VM takes: a tap on a bridge, a macvtap on a parent (a managed network's NIC is
 * checked at start, when its kind is known).
 */
const VM_NICTYPES = new Set(['bridged', 'macvlan']);
/** `disk` options that only make sense for a container's mounts. */
const CONTAINER_DISK_OPTIONS: Record<string, string> = {
  shift: 'id shifting applies to containers\' mounts only',
  propagation: 'mount propagation applies to containers\' mounts only',
  'raw.mount.options': 'mount options apply to containers\' mounts only',
};

export function refusedDevice(config: DeviceConfig): string | undefined {
  const type = config.type ?? '';
  if (type === 'disk') {
    if (config.path === '/' && config.source) return 'a virtual machine\'s "/" is its root disk: another disk cannot be mounted there';
    for (const [option, why] of Object.entries(CONTAINER_DISK_OPTIONS)) {
      if (config[option] !== undefined && config[option] !== '') return `"${option}" cannot be used on a virtual machine (${why})`;
    }
  }
  if (type === 'nic' && config.nictype && !VM_NICTYPES.has(config.nictype)) {
    return `nictype "${config.nictype}" is not supported on virtual machines yet (use a bridged or macvlan NIC)`;
  }
  if (ACCEPTED.has(type)) return undefined;
  return `"${type}" devices are not supported on virtual machines`;
}
