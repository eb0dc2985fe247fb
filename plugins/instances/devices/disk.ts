/**
 * `disk`: the root disk (path `/` on a pool), host paths bind-mounted into the instance, and
 * custom storage volumes (`pool` + `source` naming the volume) mounted the same way.
 */
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import {
  isBool, parseSize, truthy,
  type CustomVolumeInfo, type CustomVolumesService, type DeviceConfig, type DeviceType, type InstanceType, type StorageService,
} from '../../../sdk/index.js';
import { checkOptions } from './device-types.js';

const OPTIONS = ['path', 'source', 'pool', 'readonly', 'required', 'optional', 'shift', 'propagation', 'size', 'size.state', 'recursive', 'boot.priority'];
const PROPAGATIONS = ['private', 'shared', 'slave', 'unbindable', 'rprivate', 'rshared', 'rslave', 'runbindable'];

export function isRootDisk(config: Record<string, string>): boolean {
  return config.type === 'disk' && config.path === '/' && !config.source;
}

/** A disk naming a custom volume rather than a host path. */
export const isVolumeDisk = (config: Record<string, string>): boolean =>
  Boolean(config.pool) && Boolean(config.source) && !config.source!.startsWith('/');

function checkVolumeUse(vol: CustomVolumeInfo, instanceType: InstanceType | 'any', config: DeviceConfig): void {
  if (vol.contentType === 'block') {
    if (instanceType === 'container') {
      throw new Error(`custom block volume "${vol.name}" cannot be attached to a container (block volumes are for virtual machines)`);
    }
    // A block volume is a whole disk of the VM: there is nothing to mount at a path.
    if (config.path) throw new Error(`custom block volume "${vol.name}" cannot have a "path" (it becomes a disk of the virtual machine)`);
  } else if (!config.path) {
    throw new Error(`custom filesystem volume "${vol.name}" needs a "path" to be mounted at`);
  }
}

export function diskDevice(storage: () => StorageService, volumes: () => CustomVolumesService | undefined = () => undefined): DeviceType {
  return {
    type: 'disk',
    hotplug: true,
    validate(config, ctx) {
      checkOptions(config, OPTIONS);
      for (const flag of ['readonly', 'required', 'optional', 'shift', 'recursive']) {
        if (config[flag] !== undefined) isBool(config[flag]);
      }
      if (config.propagation && !PROPAGATIONS.includes(config.propagation)) throw new Error(`invalid propagation "${config.propagation}"`);
      // A block volume (known once the volume is looked up) takes no path.
      if (!config.path && !isVolumeDisk(config)) throw new Error('missing "path"');
      if (config.path && !config.path.startsWith('/')) throw new Error(`"path" must be absolute, got "${config.path}"`);
      for (const key of ['size', 'size.state']) {
        if (config[key] === undefined) continue;
        parseSize(config[key]!);
        if (!isRootDisk(config)) throw new Error(`"${key}" applies to the root disk only`);
      }
      if (isRootDisk(config)) {
        if (!config.pool) throw new Error('the root disk needs a "pool"');
        return;
      }
      if (!config.source) throw new Error('missing "source"');
      if (isVolumeDisk(config)) {
        if (config.path === '/') throw new Error('a custom volume cannot be mounted at "/"');
        const service = volumes();
        if (!service) throw new Error('custom storage volumes are not enabled in this build');
        if (ctx.profile) return;
        const vol = service.find(config.pool!, ctx.project, config.source);
        if (!vol) throw new Error(`storage volume "${config.source}" not found on pool "${config.pool}"`);
        checkVolumeUse(vol, ctx.instanceType, config);
        return;
      }
      if (config.pool) throw new Error(`"source" must be a custom volume name or an absolute host path, got "${config.source}"`);
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
      if (isVolumeDisk(config)) {
        const service = volumes();
        const vol = await service?.lookup(config.pool!, ctx.project, config.source!);
        if (!service || !vol) throw new Error(`Disk device "${ctx.name}": storage volume "${config.source}" not found on pool "${config.pool}"`);
        try {
          checkVolumeUse(vol, ctx.instanceType, config);
        } catch (err) {
          throw new Error(`Disk device "${ctx.name}": ${(err as Error).message}`);
        }
        if (vol.contentType === 'block') {
          return {
            blocks: [{
              source: await service.blockFile(vol),
              readonly: truthy(config.readonly),
              shared: truthy(vol.config['security.shared']),
              label: `volume "${vol.name}" on pool "${vol.pool}"`,
            }],
          };
        }
        const vm = ctx.instanceType === 'virtual-machine';
        return {
          mounts: [{
            source: await service.path(vol),
            target: config.path,
            readonly: truthy(config.readonly),
            propagation: config.propagation || undefined,
            // Volumes keep container ids on disk, as root disks do: an idmapped mount shows them to
            // each instance through its own map (so `security.shifted` volumes share freely too).
            // A VM sees the files as they are on the host.
            shift: !vm,
            optional: false,
            file: false,
          }],
        };
      }
      let file = false;
      try {
        file = !statSync(config.source).isDirectory();
      } catch {
        if (!optional) throw new Error(`Disk device "${ctx.name}": source path "${config.source}" doesn't exist`);
      }
      // A VM takes a host file (a disk image) or block device as a disk of its own.
      if (file && ctx.instanceType === 'virtual-machine') {
        return { blocks: [{ source: config.source, readonly: truthy(config.readonly), label: `"${config.source}"` }] };
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
