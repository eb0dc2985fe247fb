/**
 * unix-hotplug: every host device node matching `vendorid`, `productid` and/or `subsystem` is
 * given to the container at /dev/<its name>, at start and then as the host's kernel announces
 * devices coming and going. Owner and mode as `uid`/`gid`/`mode`, or the host node's owner with
 * `ownership.inherit`. `required=true` refuses a start with no matching device.
 */
import { statSync } from 'node:fs';
import {
  badRequest, isBool, truthy,
  type DeviceConfig, type DeviceRunConfig, type DeviceRunningContext, type DeviceStartContext, type DeviceType, type DeviceValidationContext, type UnixNode,
} from '../../sdk/index.js';
import { checkOwnerAndMode, nodeMode, option } from './device-options.js';
import type { HostAnnouncements } from './host-announcements.js';
import { deviceIds, hostDevices, type HostDevice } from './host-devices.js';

const OPTIONS = new Set(['type', 'vendorid', 'productid', 'subsystem', 'uid', 'gid', 'mode', 'required', 'ownership.inherit']);

function isDeviceId(v: string): void {
  if (!/^[0-9a-fA-F]{4}$/.test(v)) throw new Error(`"${v}" is not a device id (4 hexadecimal digits, such as 1d6b)`);
}

function isSubsystem(v: string): void {
  if (!/^[A-Za-z0-9_-]+$/.test(v)) throw new Error(`"${v}" is not a subsystem name (such as block or tty)`);
}

export class UnixHotplug implements DeviceType {
  readonly type = 'unix-hotplug';
  readonly hotplug = true;

  constructor(private readonly announcements: HostAnnouncements) {}

  validate(config: DeviceConfig, ctx: DeviceValidationContext): void {
    if (ctx.instanceType === 'virtual-machine') throw badRequest(`Device "${ctx.name}": unix-hotplug devices are only supported on containers`);
    for (const key of Object.keys(config)) {
      if (!OPTIONS.has(key)) throw badRequest(`Invalid device option "${key}" for unix-hotplug device "${ctx.name}"`);
    }
    if (!config.vendorid && !config.productid && !config.subsystem) {
      throw badRequest(`Device "${ctx.name}": unix-hotplug devices need "vendorid", "productid" or "subsystem"`);
    }
    if (config.vendorid) option('vendorid', () => isDeviceId(config.vendorid!));
    if (config.productid) option('productid', () => isDeviceId(config.productid!));
    if (config.subsystem) option('subsystem', () => isSubsystem(config.subsystem!));
    checkOwnerAndMode(config);
    if (config.required !== undefined) option('required', () => isBool(config.required!));
    if (config['ownership.inherit'] !== undefined) option('ownership.inherit', () => isBool(config['ownership.inherit']!));
  }

  /** The host devices this config matches now. */
  private matching(c: DeviceConfig): HostDevice[] {
    const vendor = c.vendorid?.toLowerCase();
    const product = c.productid?.toLowerCase();
    return hostDevices(c.subsystem || undefined).filter((dev) => {
      if (!vendor && !product) return true;
      const ids = deviceIds(dev.sysPath);
      return (!vendor || ids.vendor === vendor) && (!product || ids.product === product);
    });
  }

  /** The owner inside: set ones win; with ownership.inherit the host node's ids, else root. */
  private owner(c: DeviceConfig, dev: HostDevice): { uid: number; gid: number } {
    let host: { uid: number; gid: number } | undefined;
    if (truthy(c['ownership.inherit'] ?? 'false')) {
      try {
        host = statSync(`/dev/${dev.devname}`);
      } catch {
        host = undefined; // no node on the host (no devtmpfs): root, as without inherit
      }
    }
    return { uid: Number(c.uid ?? host?.uid ?? 0), gid: Number(c.gid ?? host?.gid ?? 0) };
  }

  async start(ctx: DeviceStartContext): Promise<DeviceRunConfig> {
    const c = ctx.config;
    const devices = this.matching(c);
    if (!devices.length && truthy(c.required ?? 'false')) {
      throw badRequest(`Device "${ctx.name}": no host device matches it (set required=false to start without one)`);
    }
    const unixNodes: UnixNode[] = devices
      .sort((a, b) => a.devname.localeCompare(b.devname))
      .map((dev) => ({ kind: dev.kind, major: dev.major, minor: dev.minor, path: `/dev/${dev.devname}`, mode: nodeMode(c), ...this.owner(c, dev) }));
    return { unixNodes };
  }

  /** Any announcement of the subsystem (all of them without one) may change the matches: look again. */
  followHost(ctx: DeviceRunningContext, changed: () => void): () => void {
    const subsystem = ctx.config.subsystem;
    return this.announcements.subscribe((a) => {
      if (a === 'rescan' || !subsystem || a.subsystem === subsystem) changed();
    });
  }
}
