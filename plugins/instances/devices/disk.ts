/**
 * `disk`: the root disk (path `/` on a pool) and host paths bind-mounted into the instance.
 * Custom volumes (`pool` + `source`) arrive with the storage volume API.
 */
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { isBool, truthy, type DeviceConfig, type DeviceType, type StorageService } from '../../../sdk/index.js';
import { checkOptions } from './device-types.js';

const OPTIONS = ['path', 'source', 'pool', 'readonly', 'required', 'optional', 'shift', 'propagation', 'size', 'size.state', 'recursive', 'boot.priority'];
const PROPAGATIONS = ['private', 'shared', 'slave', 'unbindable', 'rprivate', 'rshared', 'rslave', 'runbindable'];

export function isRootDisk(config: Record<string, string>): boolean {
  return config.type === 'disk' && config.path === '/' && !config.source;
}

export function diskDevice(storage: () => StorageService): DeviceType {
  return {
    type: 'disk',
    hotplug: false,
    validate(config, ctx) {
      checkOptions(config, OPTIONS);
      for (const flag of ['readonly', 'required', 'optional', 'shift', 'recursive']) {
        if (config[flag] !== undefined) isBool(config[flag]);
      }
      if (config.propagation && !PROPAGATIONS.includes(config.propagation)) throw new Error(`invalid propagation "${config.propagation}"`);
      if (!config.path) throw new Error('missing "path"');
      if (!config.path.startsWith('/')) throw new Error(`"path" must be absolute, got "${config.path}"`);
      if (isRootDisk(config)) {
        if (!config.pool) throw new Error('the root disk needs a "pool"');
        return;
      }
      if (!config.source) throw new Error('missing "source"');
      if (config.pool) throw new Error('custom storage volumes are not supported by this build yet');
      if (!config.source.startsWith('/')) throw new Error(`"source" must be an absolute host path, got "${config.source}"`);
      if (!ctx.profile && truthy(config.required ?? 'true') && !existsSync(config.source)) {
        throw new Error(`source path "${config.source}" doesn't exist`);
      }
    },
    async start(ctx) {
      const { config } = ctx;
      if (isRootDisk(config)) {
        const volume = await storage().volumePath(config.pool, { type: ctx.instanceType, project: ctx.project, name: ctx.instanceName });
        return { rootfs: { path: path.join(volume, 'rootfs') } };
      }
      const optional = config.required !== undefined ? !truthy(config.required) : truthy(config.optional);
      let file = false;
      try {
        file = !statSync(config.source).isDirectory();
      } catch {
        if (!optional) throw new Error(`Disk device "${ctx.name}": source path "${config.source}" doesn't exist`);
      }
      return {
        mounts: [{
          source: config.source,
          target: config.path,
          readonly: truthy(config.readonly),
          propagation: config.propagation || undefined,
          shift: truthy(config.shift),
          optional,
          file,
        }],
      };
    },
  };
}

/**
 * The instance's own devices with the root disk on `pool`: its own root disk moves there, or,
 * when the root comes from a profile on another pool (`inheritedPool`), a local one overrides it.
 */
export function withRootOn(devices: Record<string, DeviceConfig>, pool: string, inheritedPool: string | undefined): Record<string, DeviceConfig> {
  const out = structuredClone(devices);
  const own = Object.entries(out).find(([, d]) => isRootDisk(d));
  if (own) own[1].pool = pool;
  else if (inheritedPool !== pool) out.root = { type: 'disk', path: '/', pool };
  return out;
}
