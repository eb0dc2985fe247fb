/** The project config keys the policy reads: `restricted`, `restricted.*` and `limits.*`, with their validators. */
import { isIP } from 'node:net';
import { isBool, oneOf, type ConfigKeyDescriptor } from '../../../sdk/index.js';
import { BLOCKABLE_DEVICES, listOf, parseRanges, RESTRICTION_DEFAULTS } from './restrictions.js';
import { parseBytes, parseCount } from './units.js';

const wrap = (check: (v: string) => void) => (v: string) => {
  check(v);
};

const absolutePaths = (v: string) => {
  for (const p of listOf(v)) if (!p.startsWith('/')) throw new Error(`"${p}" is not an absolute path`);
};

/** `<uplink network>:<CIDR>` entries. Whether the uplink exists is checked once the networks family provides networks. */
const uplinkSubnets = (v: string) => {
  for (const entry of listOf(v)) {
    const cut = entry.indexOf(':');
    const cidr = entry.slice(cut + 1);
    const [addr, bits, extra] = cidr.split('/');
    const family = isIP(addr ?? '');
    const max = family === 6 ? 128 : 32;
    if (cut <= 0 || !family || extra !== undefined || !/^\d+$/.test(bits ?? '') || Number(bits) > max) {
      throw new Error(`"${entry}" is not of the form <uplink network>:<subnet in CIDR notation>`);
    }
  }
};

const names = (v: string) => {
  for (const n of listOf(v)) if (/[\s/]/.test(n)) throw new Error(`"${n}" is not a network name`);
};

function restrictionKey(key: string, choices: string[], extension: string, doc: string): ConfigKeyDescriptor {
  return { key, scope: 'project', type: 'string', default: RESTRICTION_DEFAULTS[key] ?? 'block', validate: oneOf(...choices), extension, doc };
}

export const policyKeys: ConfigKeyDescriptor[] = [
  { key: 'restricted', scope: 'project', type: 'bool', default: 'false', validate: isBool, extension: 'projects_restrictions', doc: 'Turn on the `restricted.*` keys: instances and profiles of the project may only use what they allow' },
  restrictionKey('restricted.backups', ['block', 'allow'], 'projects_restricted_backups_and_snapshots', 'Whether instance backups may be created'),
  restrictionKey('restricted.snapshots', ['block', 'allow'], 'projects_restricted_backups_and_snapshots', 'Whether instance snapshots may be created'),
  restrictionKey('restricted.cluster.target', ['block', 'allow'], 'projects_restricted_cluster_target', 'Whether requests may choose the cluster member (`target`)'),
  restrictionKey('restricted.containers.nesting', ['block', 'allow'], 'projects_restrictions', 'Whether containers may set security.nesting=true'),
  restrictionKey('restricted.containers.privilege', ['unprivileged', 'isolated', 'allow'], 'projects_restrictions', 'unprivileged: no security.privileged; isolated: containers must also set security.idmap.isolated=true; allow: anything'),
  restrictionKey('restricted.containers.lowlevel', ['block', 'allow'], 'projects_restrictions', 'Whether containers may use low-level keys (raw.lxc, raw.idmap, raw.apparmor, raw.seccomp, linux.kernel_modules, security.idmap.base/size...)'),
  restrictionKey('restricted.containers.interception', ['block', 'allow', 'full'], 'projects_restricted_intercept', 'block: no syscall interception; allow: the safe security.syscalls.intercept.* keys; full: all of them'),
  restrictionKey('restricted.virtual-machines.lowlevel', ['block', 'allow'], 'projects_restrictions', 'Whether virtual machines may use low-level keys (raw.qemu, raw.apparmor, raw.idmap, limits.memory.hugepages...)'),
  ...Object.keys(BLOCKABLE_DEVICES).map((type) => restrictionKey(`restricted.devices.${type}`, ['block', 'allow'], 'projects_restrictions', `Whether ${type} devices may be used`)),
  restrictionKey('restricted.devices.nic', ['block', 'allow', 'managed'], 'projects_restrictions', 'block: no NICs; managed: only NICs with network=; allow: any NIC'),
  restrictionKey('restricted.devices.disk', ['block', 'allow', 'managed'], 'projects_restrictions', 'block: only the root disk; managed: only disks from a storage pool; allow: host paths too (see restricted.devices.disk.paths)'),
  { key: 'restricted.devices.disk.paths', scope: 'project', type: 'list', validate: absolutePaths, extension: 'projects_restrictions', doc: 'With restricted.devices.disk=allow: host paths under which disk sources must lie (comma-separated; empty means any)' },
  { key: 'restricted.idmap.uid', scope: 'project', type: 'list', validate: wrap(parseRanges), extension: 'projects_restrictions', doc: 'Host uid ranges raw.idmap may map (e.g. 1000-1999,3000)' },
  { key: 'restricted.idmap.gid', scope: 'project', type: 'list', validate: wrap(parseRanges), extension: 'projects_restrictions', doc: 'Host gid ranges raw.idmap may map' },
  { key: 'restricted.networks.access', scope: 'project', type: 'list', validate: names, extension: 'projects_networks_restricted_access', doc: 'Networks the project\'s NICs may attach to (comma-separated; unset means all)' },
  { key: 'restricted.networks.uplinks', scope: 'project', type: 'list', validate: names, extension: 'projects_networks_restricted_uplinks', doc: 'Networks the project\'s networks may use as uplinks' },
  { key: 'restricted.networks.subnets', scope: 'project', type: 'list', validate: uplinkSubnets, extension: 'network_ovn_external_subnets', doc: 'Uplink subnets the project\'s networks may use (<uplink>:<CIDR>, comma-separated)' },
  { key: 'restricted.networks.zones', scope: 'project', type: 'list', validate: names, extension: 'projects_restrictions', doc: 'Network zones the project may use' },
  { key: 'limits.instances', scope: 'project', type: 'integer', validate: wrap(parseCount), extension: 'projects_limits_instances', doc: 'Most instances (containers plus virtual machines) the project may hold' },
  { key: 'limits.containers', scope: 'project', type: 'integer', validate: wrap(parseCount), extension: 'projects_limits', doc: 'Most containers the project may hold' },
  { key: 'limits.virtual-machines', scope: 'project', type: 'integer', validate: wrap(parseCount), extension: 'projects_limits', doc: 'Most virtual machines the project may hold' },
  { key: 'limits.networks', scope: 'project', type: 'integer', validate: wrap(parseCount), extension: 'projects_networks', doc: 'Most networks the project may hold' },
  { key: 'limits.cpu', scope: 'project', type: 'integer', validate: wrap(parseCount), extension: 'projects_limits', doc: 'Sum of the instances\' limits.cpu (each instance must then set a CPU count)' },
  { key: 'limits.memory', scope: 'project', type: 'string', validate: wrap(parseBytes), extension: 'projects_limits', doc: 'Sum of the instances\' limits.memory, an absolute size (each instance must then set an absolute limits.memory)' },
  { key: 'limits.processes', scope: 'project', type: 'integer', validate: wrap(parseCount), extension: 'projects_limits', doc: 'Sum of the instances\' limits.processes (each instance must then set it)' },
  { key: 'limits.disk', scope: 'project', type: 'string', validate: wrap(parseBytes), extension: 'projects_limits_disk', doc: 'Sum of the sizes of root disks, custom volumes and images of the project (each root disk and volume must then have a size)' },
];
