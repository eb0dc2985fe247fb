/**
 * The network family contract. The `networks` host plugin owns network records, routes and the
 * unmanaged host interfaces, offers NetworkTypesExtensionPointRef, where driver plugins
 * (`network-bridge`, ...) register a NetworkDriver in their register phase, and provides
 * NetworksServiceRef for run time. Optional capabilities (leases, NIC reservations, leftover
 * cleanup) are separate objects on the driver, checked with the type guards below, so a new
 * capability (forwards, ACL enforcement, port isolation) is one more optional field and guard.
 */
import { createExtensionPoint, createServiceRef } from './services.js';
import type { ConfigKeyDescriptor } from './config-keys.js';
import type { UsedByRegistry } from './used-by.js';

export interface NetworkInfo {
  /** The project holding the record (after `features.networks` mapping). */
  project: string;
  name: string;
  type: string;
  description: string;
  config: Record<string, string>;
}

export interface NetworkDriver {
  /** The network `type` (`bridge`, `macvlan`, ...). */
  readonly type: string;
  /** Network config keys this type accepts, beyond `user.*` (registered with scope `network`). */
  readonly configKeys?: ConfigKeyDescriptor[];
  /** Whether networks of this type may live in a project other than `default`. */
  readonly projects?: boolean;
  /**
   * Before a create or update is stored: fill generated values (an `auto` address becomes a real
   * subnet; on create, keys left out may get their creation-time values). `others` are the other
   * managed networks, to avoid clashing with them.
   */
  fillDefaults?(net: NetworkInfo, others: NetworkInfo[], change: 'create' | 'update'): Promise<void>;
  /**
   * Checks that need more than one key or the host (overlapping subnets, a missing parent
   * interface, an address outside its subnet). Throws a 400 ApiError. Runs on create and update.
   */
  validate(net: NetworkInfo, others: NetworkInfo[]): Promise<void>;
  /**
   * Bring the network up on the host, or make an existing one match its config (boot adopts what
   * a previous daemon left running). Idempotent; on failure it undoes what this call added.
   */
  start(net: NetworkInfo): Promise<void>;
  /** Tear the network down on the host (interfaces, helper processes, firewall rules). Idempotent. */
  stop(net: NetworkInfo): Promise<void>;
  /** Apply a config change to a running network; on failure the old config is put back. */
  update(previous: NetworkInfo, next: NetworkInfo): Promise<void>;
  /** Remove what the network keeps on disk (called after `stop` when the network is deleted). */
  delete(net: NetworkInfo): Promise<void>;
  /** Move on-disk state to a new name (called between `stop` under the old name and `start` under the new). */
  rename?(net: NetworkInfo, newName: string): Promise<void>;
  /**
   * The host interface of the network: what `state` reads, and what NICs attach to unless
   * `nicSettings` names another parent.
   */
  interfaceName(net: NetworkInfo): string;
  /**
   * Networks that are descriptions of a host interface (macvlan, physical) and own none: the
   * parent their NICs attach to and the settings they impose on those NICs.
   */
  nicSettings?(net: NetworkInfo): NetworkNicSettings;
  readonly leases?: NetworkLeases;
  readonly nics?: NetworkNicHooks;
  readonly cleanup?: NetworkCleanup;
  readonly lifetime?: NetworkLifetime;
}

export interface NetworkLease {
  hostname: string;
  hwaddr: string;
  address: string;
  /** `dynamic`, `static` or `gateway`. */
  type: string;
  /** Cluster member holding the lease ("" outside a cluster). */
  location: string;
}

/** Drivers that hand out addresses (DHCP) can list them. */
export interface NetworkLeases {
  list(net: NetworkInfo): Promise<NetworkLease[]>;
}

/** What a network imposes on the NICs attached to it with `network=`. */
export interface NetworkNicSettings {
  /** Host interface the NIC attaches to (macvlan) or takes into the instance (physical). */
  parent: string;
  /** VLAN the NIC's traffic goes on (a `<parent>.<vlan>` interface made when the NIC starts). */
  vlan?: string;
  /** GARP VLAN Registration Protocol on that VLAN interface. */
  gvrp?: boolean;
  mtu?: number;
}

/** A NIC of an instance attached to a managed network. */
export interface NicAttachment {
  project: string;
  instance: string;
  /** Device name in the instance's devices. */
  device: string;
  hwaddr: string;
  /** Static addresses the NIC asks for (`ipv4.address`, `ipv6.address`), when set. */
  ipv4?: string;
  ipv6?: string;
  /** Host-side interface name, when known. */
  hostName?: string;
}

/** Drivers that react to NICs coming and going (static DHCP reservations by MAC, port setup). */
export interface NetworkNicHooks {
  /** Throw a 400 ApiError to refuse the NIC (an address outside the subnet, a taken address). */
  plugged(net: NetworkInfo, nic: NicAttachment): Promise<void>;
  unplugged(net: NetworkInfo, nic: NicAttachment): Promise<void>;
}

/** Drivers whose host state may outlive a crashed daemon: remove what no record explains. */
export interface NetworkCleanup {
  /** Called once at boot, before any `start`, with every managed network of this type. */
  leftovers(known: NetworkInfo[]): Promise<void>;
}

/** Drivers with background work (watching helper processes) and a say in daemon shutdown. */
export interface NetworkLifetime {
  /** After every network of this type has been started at boot. */
  watch?(): void;
  /** Daemon shutdown; with `hostShutdown` the host is going down and the networks may be torn down. */
  shutdown(nets: NetworkInfo[], hostShutdown: boolean): Promise<void>;
}

/**
 * A plugin that adds config keys to networks and follows each network's life on the host (ACLs,
 * forwards), registered with NetworksService.addPolicy. The networks family calls it inside its
 * own change lock, after the driver has brought the network up and before the record is written.
 */
export interface NetworkPolicy {
  /** Keys this adds to networks of the given types (validated like the driver's own keys). */
  readonly configKeys?: { types: string[]; keys: ConfigKeyDescriptor[] };
  /** Refuse a config before anything changes (throw a 400 ApiError); runs on create and update. */
  check?(net: NetworkInfo): Promise<void>;
  /**
   * The network is up with this config (create, update, boot, the new name of a rename): make the
   * host match, all or nothing. A throw on create or update undoes the change.
   */
  applied?(net: NetworkInfo): Promise<void>;
  /** The network is going away (delete), or leaving its old name (rename, with `renamedTo`). */
  removed?(net: NetworkInfo, renamedTo?: string): Promise<void>;
}

export const canListLeases = (d: NetworkDriver): d is NetworkDriver & { leases: NetworkLeases } => d.leases !== undefined;
export const hasNicHooks = (d: NetworkDriver): d is NetworkDriver & { nics: NetworkNicHooks } => d.nics !== undefined;
export const hasCleanup = (d: NetworkDriver): d is NetworkDriver & { cleanup: NetworkCleanup } => d.cleanup !== undefined;
export const hasLifetime = (d: NetworkDriver): d is NetworkDriver & { lifetime: NetworkLifetime } => d.lifetime !== undefined;

/** Registration of network types into the networks family, open while plugins register. */
export interface NetworkTypesExtensionPoint {
  registerDriver(driver: NetworkDriver): void;
}

export const NetworkTypesExtensionPointRef = createExtensionPoint<NetworkTypesExtensionPoint>('networks.registration');

/** What the networks family answers at run time. */
export interface NetworksService {
  /** Add keys to network types and follow network changes (see NetworkPolicy). */
  addPolicy(policy: NetworkPolicy): void;
  /**
   * A managed network as seen from `project` (mapped through `features.networks`): 404 when there
   * is none, 400 when its type is not enabled in this build.
   */
  get(project: string, name: string): Promise<NetworkInfo>;
  list(project: string): Promise<NetworkInfo[]>;
  /** The host interface a NIC on this network attaches to (the bridge for `bridge` networks). */
  parentInterface(project: string, name: string): Promise<string>;
  /** The parent and the settings the network imposes on its NICs (just the parent for a bridge). */
  nicSettings(project: string, name: string): Promise<NetworkNicSettings>;
  /** Tell the network's driver a NIC was attached (400 when the driver refuses it) or detached. */
  nicPlugged(project: string, network: string, nic: NicAttachment): Promise<void>;
  nicUnplugged(project: string, network: string, nic: NicAttachment): Promise<void>;
  /** Other plugins add what uses a network; `project` is the network's own project. */
  readonly usedBy: UsedByRegistry;
}

export const NetworksServiceRef = createServiceRef<NetworksService>('networks');
/** The manifests' name of the network type extension point (`provides.registers`). */
export const NETWORK_TYPE_POINT = 'network-type';

export const networkUrl = (project: string, name: string): string => {
  const base = `/1.0/networks/${encodeURIComponent(name)}`;
  return project === 'default' ? base : `${base}?project=${encodeURIComponent(project)}`;
};
