/** Instance config keys the liblxc driver honours (the instances family registers them, scope `instance`). */
import { isBool, isInt, type ConfigKeyDescriptor, type Validator } from '../../sdk/index.js';
import { parseRawIdmap } from './idmap.js';
import { checkHugepages, HUGEPAGE_KEYS } from './hugepages.js';
import { KERNEL_LIMIT_NAMES, parseKernelLimit } from './kernel-limits.js';
import { checkCpu, checkMemory } from './limits.js';
import { checkRawLxc } from './raw-lxc.js';
import { SYSCALL_KEYS } from './seccomp-profile.js';

const isUint32: Validator = (v) => {
  if (!/^\d+$/.test(v) || Number(v) > 0xffffffff) throw new Error(`Invalid value for uint32 "${v}"`);
};

export const LXC_KEYS: ConfigKeyDescriptor[] = [
  // Pre-copy of memory belongs to live migration (CRIU), which this build refuses (decision 0042); the keys
  // are taken so that a container copied from the reference with them set keeps its config.
  { key: 'migration.incremental.memory', scope: 'instance', type: 'bool', default: 'false', validate: isBool, live: true, extension: 'migration_pre_copy', doc: 'Live migration: copy memory in rounds before the final stop (kept for configs from the reference; live migration is not available here)' },
  { key: 'migration.incremental.memory.iterations', scope: 'instance', type: 'integer', default: '10', validate: isUint32, live: true, extension: 'migration_pre_copy', doc: 'Live migration: most rounds of memory pre-copy (kept, not used: no live migration here)' },
  { key: 'migration.incremental.memory.goal', scope: 'instance', type: 'integer', default: '70', validate: isUint32, live: true, extension: 'migration_pre_copy', doc: 'Live migration: percentage of memory copied after which pre-copy stops (kept, not used: no live migration here)' },
  { key: 'security.privileged', scope: 'instance', type: 'bool', default: 'false', validate: isBool, doc: 'Run the container without an id map (container root is host root)' },
  { key: 'security.nesting', scope: 'instance', type: 'bool', default: 'false', validate: isBool, doc: 'Allow containers inside the container (proc and sys mounted read-write)' },
  { key: 'security.idmap.isolated', scope: 'instance', type: 'bool', default: 'false', validate: isBool, extension: 'id_map', doc: 'Give the container a range of host ids no other isolated container uses' },
  { key: 'security.idmap.size', scope: 'instance', type: 'integer', validate: isUint32, extension: 'id_map', doc: 'Number of ids in an isolated map (default 65536)' },
  { key: 'security.idmap.base', scope: 'instance', type: 'integer', validate: isUint32, extension: 'id_map_base', doc: 'Host id where an isolated map starts (default: allocated)' },
  { key: 'raw.idmap', scope: 'instance', type: 'string', extension: 'id_map', doc: 'Host ids mapped straight into the container: lines of `uid|gid|both <host>[-<last>] <container>[-<last>]`',
    validate: (v) => void parseRawIdmap(v) },
  { key: 'raw.lxc', scope: 'instance', type: 'string', validate: checkRawLxc, doc: 'liblxc config lines appended to the generated config (parsed by liblxc when set)' },
  { key: 'limits.cpu', scope: 'instance', type: 'string', live: true, validate: checkCpu, doc: 'Number of CPUs, or a list of CPU ids and ranges (0-1,3), the container may run on' },
  { key: 'limits.memory', scope: 'instance', type: 'string', live: true, validate: checkMemory, doc: 'Memory limit: bytes with an optional unit (kB, MB, GB, KiB, MiB, GiB...) or a percentage of the host\'s memory' },
  { key: 'limits.processes', scope: 'instance', type: 'integer', live: true, validate: isInt, doc: 'Maximum number of processes in the container' },
  ...HUGEPAGE_KEYS.map((key): ConfigKeyDescriptor => ({ key, scope: 'instance', type: 'string', live: true, validate: checkHugepages, extension: 'limits_hugepages',
    doc: `Most memory the container may take in huge pages of ${key.split('.').pop()} (a size: 64MB, 1GiB...); refused on hosts without such pages or the hugetlb controller` })),
  ...KERNEL_LIMIT_NAMES.map((name): ConfigKeyDescriptor => ({ key: `limits.kernel.${name}`, scope: 'instance', type: 'string', validate: (v) => void parseKernelLimit(v), extension: 'kernel_limits',
    doc: `Resource limit RLIMIT_${name.toUpperCase()} (prlimit) of the container's processes: \`unlimited\`, a number, or \`soft:hard\`; applied at the next start` })),
  { key: 'volatile.idmap.base', scope: 'instance', type: 'integer', extension: 'id_map', doc: 'First host id of the container\'s map (0: the shared map)' },
  { key: 'volatile.idmap.next', scope: 'instance', type: 'string', extension: 'id_map_current', doc: 'Id map to use at the next start (JSON)' },
  { key: 'volatile.idmap.current', scope: 'instance', type: 'string', extension: 'id_map_current', doc: 'Id map in effect since the last start (JSON)' },
  { key: 'volatile.last_state.idmap', scope: 'instance', type: 'string', extension: 'id_map_current', doc: 'Id map the files on disk are shifted to (JSON; [] as the rootfs is never shifted: it is mounted idmapped)' },
  ...SYSCALL_KEYS,
];
