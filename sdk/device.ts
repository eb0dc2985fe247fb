/**
 * Device types (`disk`, `nic`, ...): each validates its config and, when an instance starts,
 * returns a declarative run config that the instance driver applies. Device types are registered
 * with the instances family (see InstancesExtensionPointRef in sdk/instance).
 */
import type { InstanceType } from './instance-types.js';

export type DeviceConfig = Record<string, string>;

export interface DeviceValidationContext {
  instanceType: InstanceType | 'any';
  /** Device name (the key in `devices`). */
  name: string;
  /** Validating a profile's devices rather than an instance's expanded devices. */
  profile: boolean;
  project: string;
}

/** What a device asks the driver to set up when the instance starts. */
export interface DeviceRunConfig {
  /** The device this config came from (filled by the instances family). */
  device?: string;
  /** The root filesystem (only the root disk sets it). */
  rootfs?: { path: string };
  mounts?: DeviceMount[];
  /** Disks of their own for a virtual machine (block volumes, image files). */
  blocks?: DeviceBlock[];
  /** Network interfaces to give the instance. */
  nics?: NicRunConfig[];
  /** Device nodes (unix-char, unix-block) the instance gets, at start or hot-plugged. */
  unixNodes?: UnixNode[];
  /**
   * Volatile keys of this device to record, without the `volatile.<device>.` prefix (`hwaddr`,
   * `host_name`); an empty value removes the key.
   */
  volatile?: Record<string, string>;
}

/**
 * One network interface of an instance, declared by a device type and made by the instance
 * driver: at start through its own configuration, on a running instance by moving the interface
 * into the instance's network namespace. Host-side policy (filters, shaping, host routes) stays
 * with the device type (see DeviceType.started).
 */
export interface NicRunConfig {
  /** Interface name inside the instance. */
  name: string;
  /**
   * `veth`: a pair, the host end named `hostName` (attached to the bridge `link` when set);
   * `macvlan`: on the parent `link`; `phys`: the host interface `link` moves in (and back out).
   */
  kind: 'veth' | 'macvlan' | 'phys';
  hostName?: string;
  link?: string;
  hwaddr?: string;
  mtu?: number;
  /** macvlan mode (`bridge`, `vepa`, `private`, `passthru`). */
  macvlanMode?: string;
  /** Addresses set inside the instance (CIDR), for NICs that configure them (routed). */
  ipv4?: string[];
  ipv6?: string[];
  /** Default gateways inside, reached through this interface (on-link). */
  ipv4Gateway?: string;
  ipv6Gateway?: string;
}

/**
 * A character or block device node inside a container. The driver makes it on the host (owned by
 * the host ids `uid`/`gid` map to), bind-mounts it at `path` and lets the container use it
 * through its device cgroup; all three are undone when the device goes or the instance stops.
 */
export interface UnixNode {
  kind: 'c' | 'b';
  major: number;
  minor: number;
  /** Path inside the instance (absolute). */
  path: string;
  /** Owner and mode as the instance sees them. */
  uid: number;
  gid: number;
  mode: number;
}

export interface DeviceMount {
  /** Host path. */
  source: string;
  /** Path inside the instance (absolute). */
  target: string;
  readonly?: boolean;
  /** rprivate, rshared, rslave, private, shared, slave. */
  propagation?: string;
  /** Idmapped bind mount so host ownership shows through the instance's id map. */
  shift?: boolean;
  /** Skip silently when the source is missing (`required=false`). */
  optional?: boolean;
  /** The source is a file rather than a directory. */
  file?: boolean;
}

/** A disk image or host block device that a virtual machine gets as a disk of its own. */
export interface DeviceBlock {
  /** Host path of the image file or block device. */
  source: string;
  readonly?: boolean;
  /** Several running instances may hold it at once (the volume's `security.shared`). */
  shared?: boolean;
  /** How messages name it (`volume "b1" on pool "default"`); the source path otherwise. */
  label?: string;
}

export interface DeviceStartContext {
  project: string;
  instanceName: string;
  instanceType: InstanceType;
  name: string;
  config: DeviceConfig;
  /** This device's volatile keys, without the `volatile.<device>.` prefix. */
  volatile: Record<string, string>;
  /** Names inside the instance already taken by its other NICs (for picking `ethN`). */
  takenNicNames?: string[];
  /** The instance's expanded devices (a proxy in NAT mode looks for its NIC's static address). */
  devices?: Record<string, DeviceConfig>;
}

/** A device of a running instance (after start or hot-plug). */
export interface DeviceRunningContext extends DeviceStartContext {
  /** The instance's init process on the host (its namespaces are reached through it). */
  pid: number;
  /** What start returned for this device. */
  run: DeviceRunConfig;
}

export interface DeviceType {
  readonly type: string;
  /** Throws an ApiError (400) naming the bad option. */
  validate(config: DeviceConfig, ctx: DeviceValidationContext): void;
  /**
   * Checks of an instance's device that need other families (a managed network exists), after
   * `validate`; not run for profiles. Throws an Error whose message names the problem.
   */
  check?(config: DeviceConfig, ctx: DeviceValidationContext): Promise<void>;
  start(ctx: DeviceStartContext): Promise<DeviceRunConfig>;
  /**
   * Volatile keys a device gets as soon as it is added to an instance, running or not (a NIC's
   * MAC address and interface name), without the `volatile.<device>.` prefix.
   */
  prepare?(ctx: DeviceStartContext): Record<string, string>;
  /**
   * Once the instance runs with the device (at start or hot-plug): host-side work that needs the
   * instance or its interfaces (firewall rules, shaping, host routes, forwarder processes). A
   * throw fails the start (or the hot-plug) and `stop` is called.
   */
  started?(ctx: DeviceRunningContext): Promise<void>;
  /**
   * After the instance stopped, or before the device is unplugged from a running one: undo what
   * start and started did. Resolves with volatile keys to change (as DeviceRunConfig.volatile).
   */
  stop?(ctx: DeviceStartContext): Promise<Record<string, string> | void>;
  /** Whether the device can be added to or removed from a running instance. */
  readonly hotplug?: boolean;
  /**
   * Devices that follow the host (a node given when the host's kernel announces it, taken back
   * when it goes): called once the instance runs with the device. The type calls `changed` when
   * what `start` would return may differ now; the instances family then runs `start` again and,
   * when the run config differs, has the driver change the device in place
   * (InstanceDriver.updateDevice; for types without `started`/`stop`) or unplugs it and plugs the
   * new one. Also called for a
   * running instance a restarted daemon adopts (then the device is plugged again once, as the
   * host may have changed while no daemon watched). Returns what stops following, called before
   * the device is unplugged or once the instance stopped. Needs `hotplug`.
   */
  followHost?(ctx: DeviceRunningContext, changed: () => void): () => void;
}
