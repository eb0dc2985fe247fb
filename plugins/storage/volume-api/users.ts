/**
 * Who uses which volume, read from the instances and profiles families (both optional: a build
 * without them has no users). Built once per request so that listing many volumes costs one scan.
 */
import {
  featureProjectOf, instanceUrl, InstancesServiceRef, ProfilesServiceRef, resourceUrl,
  type DeviceConfig, type InstanceSummary, type PluginContext,
} from '../../../sdk/index.js';

const userKey = (project: string, pool: string, name: string) => `${project}\u0000${pool}\u0000${name}`;

/** A disk device that attaches a custom volume (not a host path, not the root disk). */
export const isVolumeDisk = (d: DeviceConfig): boolean =>
  d.type === 'disk' && Boolean(d.pool) && Boolean(d.source) && !d.source!.startsWith('/');

export const isRootDiskDevice = (d: DeviceConfig): boolean => d.type === 'disk' && d.path === '/' && !d.source;

export class VolumeUsers {
  /** Whether the daemon itself keeps files on a volume (daemon storage); it then shows `/1.0` as a user. */
  daemonHolds?: (project: string, pool: string, name: string) => boolean;

  constructor(private readonly ctx: PluginContext) {}

  async instances(): Promise<InstanceSummary[]> {
    return (await this.ctx.services.get(InstancesServiceRef)?.list()) ?? [];
  }

  /** Custom volume users keyed by (volume project, pool, volume name). */
  async customVolumeUsers(projects: Iterable<string> = []): Promise<(project: string, pool: string, name: string) => string[]> {
    const map = new Map<string, Set<string>>();
    const add = (key: string, url: string) => {
      let set = map.get(key);
      if (!set) map.set(key, (set = new Set()));
      set.add(url);
    };
    const volumeProject = new Map<string, Promise<string>>();
    const projectOf = (project: string) => {
      let p = volumeProject.get(project);
      if (!p) volumeProject.set(project, (p = featureProjectOf(this.ctx.services, project, 'storage.volumes')));
      return p;
    };
    const seen = new Set<string>(['default', ...projects]);
    for (const inst of await this.instances()) {
      seen.add(inst.project);
      for (const device of Object.values(inst.expandedDevices)) {
        if (!isVolumeDisk(device)) continue;
        add(userKey(await projectOf(inst.project), device.pool!, device.source!), instanceUrl(inst.project, inst.name));
      }
    }
    const profiles = this.ctx.services.get(ProfilesServiceRef);
    if (profiles) {
      for (const project of seen) {
        for (const profile of await profiles.list(project).catch(() => [])) {
          for (const device of Object.values(profile.devices)) {
            if (!isVolumeDisk(device)) continue;
            add(userKey(await projectOf(project), device.pool!, device.source!), resourceUrl(`/1.0/profiles/${encodeURIComponent(profile.name)}`, project));
          }
        }
      }
    }
    return (project, pool, name) => {
      const users = [...(map.get(userKey(project, pool, name)) ?? [])].sort();
      return this.daemonHolds?.(project, pool, name) ? ['/1.0', ...users] : users;
    };
  }

  async usersOf(project: string, pool: string, name: string): Promise<string[]> {
    return (await this.customVolumeUsers([project]))(project, pool, name);
  }

  /** Instances whose root disk is on `pool` (their volumes live there). */
  async instancesOnPool(pool: string, project?: string): Promise<InstanceSummary[]> {
    return (await this.instances()).filter((inst) =>
      (project === undefined || inst.project === project) && Object.values(inst.expandedDevices).some((d) => isRootDiskDevice(d) && d.pool === pool));
  }
}
