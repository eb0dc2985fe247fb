/**
 * A unix-char or unix-block device: `source` (host node) and/or `path` (inside), each defaulting to
 * the other; the node's numbers from `major`/`minor` or else from the source; the owner and mode
 * the container sees. The node itself is made by the instance driver (DeviceRunConfig.unixNodes).
 * A missing source fails the start (or the hot-plug) unless `required=false`, which skips it;
 * such a device then follows the host: its node is given when the kernel announces the source,
 * and taken back when the source goes.
 */
import { statSync, type Stats } from 'node:fs';
import {
  badRequest, isBool, truthy,
  type DeviceConfig, type DeviceRunConfig, type DeviceRunningContext, type DeviceStartContext, type DeviceType, type DeviceValidationContext, type UnixNode,
} from '../../sdk/index.js';
import type { HostAnnouncements } from './host-announcements.js';
import { bounded, checkOwnerAndMode, nodeMode, option } from './device-options.js';

const OPTIONS = new Set(['type', 'source', 'path', 'major', 'minor', 'uid', 'gid', 'mode', 'required']);
/** Linux device numbers: 12 bits of major, 20 of minor. */
const MAX_MAJOR = 4095;
const MAX_MINOR = 1048575;

/** Linux's split of a device number (glibc's major()/minor()). */
function numbers(st: Stats): { major: number; minor: number } {
  const rdev = BigInt(st.rdev);
  return {
    major: Number(((rdev >> 8n) & 0xfffn) | ((rdev >> 32n) & ~0xfffn)),
    minor: Number((rdev & 0xffn) | ((rdev >> 12n) & ~0xffn)),
  };
}

export class UnixDevice implements DeviceType {
  readonly hotplug = true;
  private readonly kind: 'c' | 'b';

  constructor(readonly type: 'unix-char' | 'unix-block', private readonly announcements: HostAnnouncements) {
    this.kind = type === 'unix-char' ? 'c' : 'b';
  }

  /** Only an optional device named by its source follows the host (fixed numbers need no source). */
  followHost(ctx: DeviceRunningContext, changed: () => void): () => void {
    const c = ctx.config;
    if (c.required === undefined || truthy(c.required) || (c.major !== undefined && c.minor !== undefined)) return () => undefined;
    const source = c.source || c.path!;
    return this.announcements.subscribe((a) => {
      if (a === 'rescan' || `/dev/${a.devname}` === source) changed();
    });
  }

  validate(config: DeviceConfig, ctx: DeviceValidationContext): void {
    if (ctx.instanceType === 'virtual-machine') throw badRequest(`Device "${ctx.name}": ${this.type} devices are only supported on containers`);
    for (const key of Object.keys(config)) {
      if (!OPTIONS.has(key)) throw badRequest(`Invalid device option "${key}" for ${this.type} device "${ctx.name}"`);
    }
    if (!config.source && !config.path) throw badRequest(`Device "${ctx.name}": ${this.type} devices need "source" or "path"`);
    for (const key of ['source', 'path'] as const) {
      const v = config[key];
      if (v !== undefined && v !== '' && (!v.startsWith('/') || /[\0\n\r]/.test(v) || v.split('/').includes('..'))) {
        throw badRequest(`Invalid value for device option "${key}": "${v}" must be an absolute path without ".."`);
      }
    }
    if (config.major !== undefined) option('major', () => bounded(MAX_MAJOR)(config.major!));
    if (config.minor !== undefined) option('minor', () => bounded(MAX_MINOR)(config.minor!));
    checkOwnerAndMode(config);
    if (config.required !== undefined) option('required', () => isBool(config.required!));
  }

  async start(ctx: DeviceStartContext): Promise<DeviceRunConfig> {
    const c = ctx.config;
    const source = c.source || c.path!;
    const inside = c.path || c.source!;
    const required = c.required === undefined || truthy(c.required);
    let st: Stats | undefined;
    try {
      st = statSync(source);
    } catch {
      st = undefined;
    }
    let major = c.major !== undefined ? Number(c.major) : undefined;
    let minor = c.minor !== undefined ? Number(c.minor) : undefined;
    if (major === undefined || minor === undefined) {
      if (!st) {
        if (!required) return {};
        throw badRequest(`Device "${ctx.name}": the source "${source}" does not exist (set required=false to start without it)`);
      }
      const isRight = this.kind === 'c' ? st.isCharacterDevice() : st.isBlockDevice();
      if (!isRight) throw badRequest(`Device "${ctx.name}": "${source}" is not a ${this.kind === 'c' ? 'character' : 'block'} device`);
      const n = numbers(st);
      major ??= n.major;
      minor ??= n.minor;
    }
    const node: UnixNode = {
      kind: this.kind,
      major,
      minor,
      path: inside,
      uid: Number(c.uid ?? 0),
      gid: Number(c.gid ?? 0),
      mode: nodeMode(c),
    };
    return { unixNodes: [node] };
  }
}
