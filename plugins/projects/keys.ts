/**
 * Project configuration keys (scope `project`): features, limits, restrictions, image and backup
 * settings, with the reference's accepted values. What the limits and restrictions mean is the
 * policy gate's business; here they are only described and validated.
 */
import { isBool, isInt, oneOf, parseSize, type ConfigKeyDescriptor, type Validator } from '../../sdk/index.js';

const isCount: Validator = (v) => {
  if (!/^\d+$/.test(v) || Number(v) > 0xffffffff) throw new Error(`Invalid value "${v}" (a whole number from 0 to 4294967295)`);
};

const isSize: Validator = (v) => {
  parseSize(v);
};

/** Comma-separated ids and id ranges: `1000`, `1000-1999,5000`. */
const isIdRanges: Validator = (v) => {
  for (const part of v.split(',')) {
    const m = /^\s*(\d+)(?:-(\d+))?\s*$/.exec(part);
    if (!m || (m[2] !== undefined && Number(m[2]) < Number(m[1]))) throw new Error(`Invalid id or id range "${part.trim()}"`);
  }
};

/** `<uplink>:<CIDR>` pairs, comma-separated. */
const isUplinkSubnets: Validator = (v) => {
  for (const part of v.split(',')) {
    const m = /^\s*([^:\s]+):([0-9a-fA-F:.]+)\/(\d{1,3})\s*$/.exec(part);
    if (!m) throw new Error(`Invalid uplink subnet "${part.trim()}" (expected <uplink network>:<CIDR>)`);
  }
};

const ARCHITECTURES = ['i686', 's390x', 'ppc64le', 'mips', 'mips64', 'riscv32', 'riscv64', 'x86_64', 'armv7l', 'armv8l', 'ppc', 'armv6l', 'aarch64', 'ppc64'];
const COMPRESSORS = ['bzip2', 'gzip', 'lz4', 'lzma', 'xz', 'zstd', 'none'];

const feature = (name: string, extension: string, what: string): ConfigKeyDescriptor => ({
  key: `features.${name}`, scope: 'project', type: 'bool', validate: isBool, extension,
  doc: `Whether the project has its own ${what} (otherwise it uses those of the default project). Fixed once the project holds anything.`,
});

const limit = (name: string, extension: string, validate: Validator, what: string): ConfigKeyDescriptor => ({
  key: `limits.${name}`, scope: 'project', type: name === 'disk' || name === 'memory' ? 'string' : 'integer', validate, extension,
  doc: `Largest ${what} the project may hold.`,
});

const restriction = (key: string, choices: string[], extension: string, what: string): ConfigKeyDescriptor => ({
  key: `restricted.${key}`, scope: 'project', type: 'string', validate: oneOf(...choices), extension,
  doc: `${what} (${choices.join(', ')}); applies when \`restricted\` is true.`,
});

const deviceRestriction = (type: string, what: string): ConfigKeyDescriptor =>
  restriction(`devices.${type}`, type === 'nic' || type === 'disk' ? ['block', 'allow', 'managed'] : ['block', 'allow'], 'projects_restrictions', `Whether instances may use ${what}`);

export const PROJECT_KEYS: ConfigKeyDescriptor[] = [
  feature('images', 'projects', 'images and image aliases'),
  feature('profiles', 'projects', 'profiles'),
  feature('storage.volumes', 'projects', 'custom storage volumes'),
  feature('networks', 'projects_networks', 'networks'),

  limit('containers', 'projects_limits', isCount, 'number of containers'),
  limit('virtual-machines', 'projects_limits', isCount, 'number of virtual machines'),
  limit('instances', 'projects_limits_instances', isCount, 'number of instances (containers and virtual machines)'),
  limit('cpu', 'projects_limits', isCount, 'sum of the instances\' limits.cpu'),
  limit('memory', 'projects_limits', isSize, 'sum of the instances\' limits.memory (a size)'),
  limit('processes', 'projects_limits', isCount, 'sum of the instances\' limits.processes'),
  limit('disk', 'projects_limits_disk', isSize, 'total disk of instance, custom and image volumes (a size)'),
  limit('networks', 'projects_networks', isCount, 'number of networks'),

  {
    key: 'restricted', scope: 'project', type: 'bool', validate: isBool, extension: 'projects_restrictions',
    doc: 'Turns on the restricted.* checks for everything created or changed in the project.',
  },
  restriction('backups', ['block', 'allow'], 'projects_restricted_backups_and_snapshots', 'Whether instance and volume backups may be made'),
  restriction('snapshots', ['block', 'allow'], 'projects_restricted_backups_and_snapshots', 'Whether instance and volume snapshots may be made'),
  restriction('cluster.target', ['block', 'allow'], 'projects_restricted_cluster_target', 'Whether a cluster member may be picked with `target`'),
  restriction('containers.nesting', ['block', 'allow'], 'projects_restrictions', 'Whether containers may set security.nesting'),
  restriction('containers.lowlevel', ['block', 'allow'], 'projects_restrictions', 'Whether containers may set low-level keys (raw.*, boot.host_shutdown_timeout...)'),
  restriction('containers.privilege', ['unprivileged', 'isolated', 'allow'], 'projects_restrictions', 'Which containers may be privileged or share an id map'),
  restriction('containers.interception', ['block', 'allow', 'full'], 'projects_restricted_intercept', 'Which system call interceptions containers may ask for'),
  restriction('virtual-machines.lowlevel', ['block', 'allow'], 'projects_restrictions', 'Whether virtual machines may set low-level keys (raw.*)'),
  deviceRestriction('unix-char', 'unix-char devices'),
  deviceRestriction('unix-block', 'unix-block devices'),
  deviceRestriction('unix-hotplug', 'unix-hotplug devices'),
  deviceRestriction('infiniband', 'infiniband devices'),
  deviceRestriction('gpu', 'gpu devices'),
  deviceRestriction('usb', 'usb devices'),
  deviceRestriction('pci', 'pci devices'),
  deviceRestriction('proxy', 'proxy devices'),
  deviceRestriction('nic', 'nic devices (managed: only those attached to a managed network)'),
  deviceRestriction('disk', 'disk devices (managed: only pool volumes, no host paths)'),
  {
    key: 'restricted.devices.disk.paths', scope: 'project', type: 'list', extension: 'projects_restrictions',
    doc: 'Host paths (comma-separated) under which disk devices may take their source when restricted.devices.disk is allow.',
  },
  {
    key: 'restricted.idmap.uid', scope: 'project', type: 'list', validate: isIdRanges, extension: 'projects_restrictions',
    doc: 'Host user ids (and ranges) that raw.idmap of instances may map.',
  },
  {
    key: 'restricted.idmap.gid', scope: 'project', type: 'list', validate: isIdRanges, extension: 'projects_restrictions',
    doc: 'Host group ids (and ranges) that raw.idmap of instances may map.',
  },
  {
    key: 'restricted.networks.uplinks', scope: 'project', type: 'list', extension: 'projects_networks_restricted_uplinks',
    doc: 'Networks (comma-separated) the project\'s networks may use as uplinks.',
  },
  {
    key: 'restricted.networks.subnets', scope: 'project', type: 'list', validate: isUplinkSubnets, extension: 'network_ovn_external_subnets',
    doc: 'Uplink subnets (<uplink>:<CIDR>, comma-separated) the project\'s networks may route.',
  },
  {
    key: 'restricted.networks.zones', scope: 'project', type: 'list', extension: 'projects_restrictions',
    doc: 'Network zones (comma-separated) the project\'s networks may use.',
  },
  {
    key: 'restricted.networks.access', scope: 'project', type: 'list', extension: 'projects_networks_restricted_access',
    doc: 'Networks (comma-separated) the project\'s NICs may attach to with network=; unset means any.',
  },

  {
    key: 'images.compression_algorithm', scope: 'project', type: 'string', validate: oneOf(...COMPRESSORS, 'squashfs'), extension: 'projects_compression',
    doc: 'Compression of images published in this project (overrides the server\'s images.compression_algorithm).',
  },
  {
    key: 'backups.compression_algorithm', scope: 'project', type: 'string', validate: oneOf(...COMPRESSORS), extension: 'projects_compression',
    doc: 'Compression of instance backups made in this project (overrides the server\'s backups.compression_algorithm).',
  },
  {
    key: 'images.remote_cache_expiry', scope: 'project', type: 'integer', validate: isInt, extension: 'projects_images_remote_cache_expiry',
    doc: 'Days after which an unused cached remote image of the project is removed.',
  },
  {
    key: 'images.auto_update_cached', scope: 'project', type: 'bool', validate: isBool, extension: 'projects_images_auto_update',
    doc: 'Whether cached remote images of the project are kept up to date.',
  },
  {
    key: 'images.auto_update_interval', scope: 'project', type: 'integer', validate: isInt, extension: 'projects_images_auto_update',
    doc: 'Hours between checks for newer versions of cached remote images (0 turns them off).',
  },
  {
    key: 'images.default_architecture', scope: 'project', type: 'string', validate: oneOf(...ARCHITECTURES), extension: 'images_default_architecture',
    doc: 'Architecture picked when an image comes in several and the request names none.',
  },
];
