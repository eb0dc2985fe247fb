/**
 * NIC types: the `nictype` of a `nic` device. The nic-devices plugin offers the extension point
 * (NicTypesExtensionPointRef); a plugin adds a type by registering it there in its register phase and
 * naming it in its manifest (`provides.registers["nic-type"]`). The nic device does what every NIC
 * shares (option names, the interface name and MAC address inside, a managed `network=`, the host
 * end left behind); the type decides the interface the instance gets and the host-side work around
 * it, declared as a NicRunConfig for the instance driver to make.
 */
import type { DeviceConfig, DeviceRunningContext, DeviceStartContext, DeviceValidationContext, NicRunConfig } from './device.js';
import { createExtensionPoint, createServiceRef } from './services.js';

/** The manifests' name of the NIC type extension point (`provides.registers`). */
export const NIC_TYPE_POINT = 'nic-type';

/** Options every nictype takes, checked by the nic device itself. */
export const COMMON_NIC_OPTIONS = ['name', 'hwaddr', 'mtu', 'boot.priority'] as const;

/** A NIC about to start, with what the nic device has decided already. */
export interface NicStart extends DeviceStartContext {
  /** The host interface it hangs off: its own `parent`, or what its managed network decides. */
  parent?: string;
  /** The managed network (in the NIC's project) it is on, if any. */
  network?: string;
  /** VLAN, GVRP and MTU: the NIC's own keys first, then what its network imposes. */
  vlan?: string;
  gvrp: boolean;
  mtu?: number;
  /** The interface so far (name inside, MAC address, MTU; kind `veth`): the type completes it. */
  nic: NicRunConfig;
  /** Volatile keys to record so far (`name`, `hwaddr`): the type adds or drops its own. */
  changes: Record<string, string>;
}

/** A NIC being stopped (instance stopped, or unplugged from a running one). */
export interface NicStop extends DeviceStartContext {
  /** The host interface it used, with its VLAN (`<parent>.<vlan>`), when known. */
  parent?: string;
}

export interface NicType {
  readonly nictype: string;
  /** Options besides `type`, `nictype`, `user.*` and COMMON_NIC_OPTIONS; any other is refused, named. */
  readonly options: readonly string[];
  /** Managed network types whose NICs are of this nictype (`bridge` for `bridged`). */
  readonly networkTypes?: readonly string[];
  /**
   * On such a network the network decides the interface: its NICs take only `name`, `hwaddr`,
   * `boot.priority` and `network` (macvlan and physical networks).
   */
  readonly networkDecides?: boolean;
  /** The interface keeps its own MAC address: none is generated when the NIC is added. */
  readonly keepsHwaddr?: boolean;
  /** Checks of the values once the option names passed; throws an Error naming the problem. */
  validate?(config: DeviceConfig, ctx: DeviceValidationContext): void;
  /** Checks of an instance's NIC that need other families; not run for profiles. */
  check?(config: DeviceConfig, ctx: DeviceValidationContext): Promise<void>;
  /** Completes `start.nic` (and `start.changes`); throws an ApiError (400) naming the device. */
  start(start: NicStart): Promise<void>;
  /** Host-side work once the instance runs with the interface (as DeviceType.started). */
  started?(ctx: DeviceRunningContext): Promise<void>;
  /** Undo what start and started did; resolves with volatile keys to change. */
  stop?(ctx: NicStop): Promise<Record<string, string> | void>;
}

/** Registration of nictypes into the nic device, open while plugins register. */
export interface NicTypesExtensionPoint {
  registerNicType(type: NicType): void;
}

export const NicTypesExtensionPointRef = createExtensionPoint<NicTypesExtensionPoint>('nic-types.registration');

/** What the nic device answers about nictypes at run time. */
export interface NicTypesService {
  /** A registered nictype (for conformance suites and diagnostics). */
  nicType(nictype: string): NicType | undefined;
}

export const NicTypesServiceRef = createServiceRef<NicTypesService>('nic-types');
