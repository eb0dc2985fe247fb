/**
 * The instances family contract. The `instances` host plugin owns the instance records, routes and
 * generic logic. It offers InstancesExtensionPointRef, where driver plugins (`instance-lxc`, ...)
 * register an InstanceDriver and other plugins register device types (sdk/device) while they
 * register; InstancesServiceRef, what other plugins read at run time; and its hook set
 * (sdk/instance-hooks), where neighbours follow what happens to instances.
 */
import type { Duplex, Readable, Writable } from 'node:stream';
import { createExtensionPoint, createServiceRef } from './services.js';
import type { ConfigKeyDescriptor } from './config-keys.js';
import type { DeviceConfig, DeviceRunConfig, DeviceType } from './device.js';
import type { InstanceStatus, InstanceType } from './instance-types.js';
import type { InstanceFiles } from './instance-files.js';
import type { InstanceMetrics } from './metrics.js';

export * from './instance-types.js';

/** What a driver is told about an instance. */
export interface DriverInstance {
  project: string;
  name: string;
  type: InstanceType;
  architecture: string;
  /** Profiles applied, then the instance's own config (volatile keys included). */
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
  /** Host directory of the instance volume (holds `rootfs/`). */
  volumePath: string;
  /** Host directory for the instance's logs (lxc.log, console.log, exec records). */
  logDir: string;
}

export interface ExecSpec {
  command: string[];
  environment: Record<string, string>;
  cwd?: string;
  user?: number;
  group?: number;
  interactive: boolean;
  width?: number;
  height?: number;
}

/** A running command inside an instance. */
export interface ExecSession {
  readonly stdin: Writable;
  /** Under `interactive`, stdout carries the terminal (both streams). */
  readonly stdout: Readable;
  readonly stderr?: Readable;
  resize(cols: number, rows: number): void;
  /** Forward a signal (by number) to the command. */
  signal(signal: number): void;
  /** End the command now, with whatever it started (the client is gone, or the daemon stops). */
  terminate(): void;
  /** The command's exit status. */
  readonly exited: Promise<number>;
}

export interface ConsoleSession {
  readonly input: Writable;
  readonly output: Readable;
  resize(cols: number, rows: number): void;
  close(): void;
}

export interface RuntimeState {
  status: InstanceStatus;
  pid: number;
  processes: number;
  cpu: { usage: number };
  memory: { usage: number; usage_peak: number; swap_usage: number; swap_usage_peak: number };
  network: Record<string, NetworkState> | null;
}

export interface NetworkState {
  addresses: { family: string; address: string; netmask: string; scope: string }[];
  counters: { bytes_received: number; bytes_sent: number; packets_received: number; packets_sent: number; errors_received: number; errors_sent: number; packets_dropped_outbound: number; packets_dropped_inbound: number };
  hwaddr: string;
  host_name: string;
  mtu: number;
  state: string;
  type: string;
}

export interface InstanceDriver {
  readonly type: InstanceType;
  /** `lxc`, `qemu`... */
  readonly name: string;
  /** Instance config keys this driver honours (scope `instance`). */
  readonly configKeys?: ConfigKeyDescriptor[];
  /** Volatile keys to store when an instance is created or copied (id maps...). */
  initialize?(inst: DriverInstance, existing: DriverInstance[]): Promise<Record<string, string>>;
  /** Check config the driver will apply (raw.lxc...); throw (or reject with) a 400 ApiError. */
  validate?(config: Record<string, string>): void | Promise<void>;
  /** Refuse (throw a 400 ApiError) devices this kind of instance cannot take, at create and edit. */
  validateDevices?(devices: Record<string, DeviceConfig>): void;
  /** Resolves with volatile keys to record, such as the id map now in effect (`volatile.idmap.current`). */
  start(inst: DriverInstance, devices: DeviceRunConfig[]): Promise<Record<string, string> | void>;
  /** Clean shutdown within `timeoutMs` then kill; `force` kills at once. */
  stop(inst: DriverInstance, opts: { force: boolean; timeoutMs: number }): Promise<void>;
  freeze(inst: DriverInstance): Promise<void>;
  unfreeze(inst: DriverInstance): Promise<void>;
  /** Cheap (no child process): used for every listed instance. */
  status(inst: DriverInstance): Promise<InstanceStatus>;
  /** The same, synchronously, for drivers that can tell it without waiting (listings of thousands skip a promise each). */
  statusNow?(inst: DriverInstance): InstanceStatus;
  /**
   * A number equal while the status of none of this driver's instances changed, as far as the driver
   * can tell now (it may look at the host: it is asked at every read of a listing). It moves with any
   * change it sees and never returns to an earlier value; undefined when it cannot tell. A listing of
   * instances is answered again with its last bytes while it holds (VerbSpec.reuse); a driver without
   * it has every listing made afresh.
   */
  statusRevision?(): number | undefined;
  state(inst: DriverInstance): Promise<RuntimeState>;
  /** Figures for `GET /1.0/metrics`; undefined when the instance is not running. Cheap: file reads only. */
  metrics?(inst: DriverInstance): Promise<InstanceMetrics | undefined>;
  exec(inst: DriverInstance, spec: ExecSpec): Promise<ExecSession>;
  console(inst: DriverInstance, size: { width: number; height: number }): Promise<ConsoleSession>;
  /**
   * A new connection to a running instance's graphical console (`vga`: a VM's SPICE server), one
   * per channel a viewer opens. Drivers without it have no graphical console.
   */
  vgaConsole?(inst: DriverInstance): Promise<Duplex>;
  /** Host path of the console log file. */
  consoleLogPath(inst: DriverInstance): string;
  /**
   * Files of a running instance through the driver (a VM's guest agent). Without it the family
   * reads and writes the instance's root filesystem on the host, running or not.
   */
  files?(inst: DriverInstance): InstanceFiles;
  /** The init process of a running instance (undefined when stopped). */
  initPid?(inst: DriverInstance): Promise<number | undefined>;
  /** Give a running instance a started device (NICs); throw a 400 ApiError for what cannot be hot-plugged. */
  attachDevice?(inst: DriverInstance, run: DeviceRunConfig): Promise<void>;
  /** Take a hot-plugged or started device (by name) out of a running instance. */
  detachDevice?(inst: DriverInstance, device: string): Promise<void>;
  /**
   * A device of a running instance gets a new run config (it follows the host: a node came or
   * went): only what differs changes, what stays is not touched. Without it the family detaches
   * the device and attaches the new config whole.
   */
  updateDevice?(inst: DriverInstance, run: DeviceRunConfig): Promise<void>;
  /** Apply changed keys to a running instance (undefined value: unset). Throw if a key needs a restart. */
  update?(inst: DriverInstance, changed: Record<string, string | undefined>): Promise<void>;
  /**
   * Give the instance's host directories the owners and modes its config calls for (who may pass
   * into its rootfs): called after a create, after a config change and at boot.
   */
  secureFiles?(inst: DriverInstance): Promise<void>;
  /** Forget an instance (driver-side files); the volume is the family's business. */
  remove(inst: DriverInstance): Promise<void>;
  /** Driver-side names that no record owns any more (crash leftovers), removed at boot. */
  cleanup?(known: { project: string; name: string }[]): Promise<void>;
}

/** The stored view of an instance that other plugins may read. */
export interface InstanceSummary {
  project: string;
  name: string;
  type: InstanceType;
  profiles: string[];
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
  /** Profiles applied, then the instance's own values. */
  expandedConfig: Record<string, string>;
  expandedDevices: Record<string, DeviceConfig>;
  /** The cluster member holding the instance ("none" on a standalone server). */
  location?: string;
}

/** Registration into the instances family, open while plugins register. */
export interface InstancesExtensionPoint {
  registerDriver(driver: InstanceDriver): void;
  registerDeviceType(type: DeviceType): void;
}

export const InstancesExtensionPointRef = createExtensionPoint<InstancesExtensionPoint>('instances.registration');

/** What the instances family answers at run time. */
export interface InstancesService {
  list(project?: string): Promise<InstanceSummary[]>;
  /** One instance, read alone (its project's size does not matter); undefined when there is none. */
  get?(project: string, name: string): Promise<InstanceSummary | undefined>;
  /** Metrics of the running (or frozen) instances of `project`, or of every project. */
  metrics(project?: string): Promise<InstanceMetricsEntry[]>;
}

export interface InstanceMetricsEntry {
  project: string;
  name: string;
  type: InstanceType;
  metrics: InstanceMetrics;
}

export const InstancesServiceRef = createServiceRef<InstancesService>('instances');
/** The manifests' name of the device type extension point (`provides.registers`). */
export const DEVICE_TYPE_POINT = 'device-type';

/** An instance URL as the API shows it. */
export function instanceUrl(project: string, name: string): string {
  const base = `/1.0/instances/${encodeURIComponent(name)}`;
  return project === 'default' ? base : `${base}?project=${encodeURIComponent(project)}`;
}

/** One entry of an id map as `volatile.idmap.current`, `.next` and `last_state.idmap` hold it (the reference's JSON form). */
export interface IdmapEntry {
  Isuid: boolean;
  Isgid: boolean;
  Hostid: number;
  Nsid: number;
  Maprange: number;
}
