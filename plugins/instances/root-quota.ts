/**
 * The root disk's `size` as a quota on the instance's volume, where the pool's driver has quotas
 * (btrfs qgroups). dir takes `size` and enforces nothing, as the reference does. Applied when an
 * instance is created with one, when an edit of the instance or of a profile changes the size the
 * instance ends up with (running or not), and again when an edit fails after it.
 */
import { canQuota, parseSize, type DeviceConfig, type ProfileChange, type StorageService, type VolumeRef } from '../../sdk/index.js';
import { isRootDisk } from './devices/disk.js';
import { expandDevices } from './expand.js';
import type { FamilyHooks } from './hooks.js';
import type { InstanceManager } from './manager.js';

/** New volumes and instance edits: tapped on the family's `devicesChanging` hook. */
export function quotaOnDeviceChanges(hooks: FamilyHooks, storage: StorageService): void {
  hooks.devicesChanging.tapPromise('root-quota', async ({ instance, before, after, undo }) => {
    const vol = { type: instance.type, project: instance.project, name: instance.name };
    undo.add(await applyRootQuota(storage, instance.pool, vol, before, after));
  });
}

/**
 * Bytes of the root disk's `size` among expanded devices; without one, the pool's `volume.size`
 * (`poolDefault`), as the reference sizes a new instance volume; 0 when neither is set.
 */
export function rootSize(devices: Record<string, DeviceConfig>, poolDefault?: string): number {
  const size = Object.values(devices).find(isRootDisk)?.size || poolDefault;
  return size ? parseSize(size) : 0;
}

/** The pool's default volume size when its driver has quotas; undefined when it has none. */
async function quotaDefault(storage: StorageService, pool: string): Promise<{ size: string | undefined } | undefined> {
  const info = await storage.pool(pool);
  const driver = storage.driver(info.driver);
  return driver !== undefined && canQuota(driver) ? { size: info.config['volume.size'] } : undefined;
}

/**
 * Set the quota when the root size goes from `before` (undefined: a new volume, no limit yet) to
 * `after`. Resolves with a step that puts the old limit back (for a caller whose later step fails).
 */
export async function applyRootQuota(
  storage: StorageService, pool: string, vol: VolumeRef, before: Record<string, DeviceConfig> | undefined, after: Record<string, DeviceConfig>,
): Promise<() => Promise<void>> {
  const quotas = await quotaDefault(storage, pool);
  if (!quotas) return async () => {};
  const from = before ? rootSize(before, quotas.size) : 0;
  const to = rootSize(after, quotas.size);
  if (from === to) return async () => {};
  await storage.setVolumeQuota(pool, vol, to);
  return () => storage.setVolumeQuota(pool, vol, from);
}

/**
 * A profile edit: every instance using the profile (running or not) whose root size changes gets
 * its new quota; on a failure those already changed go back and the edit is refused. Resolves
 * with a step that puts them all back (the edit failing later).
 */
export async function applyProfileRootQuotas(manager: InstanceManager, storage: StorageService, change: ProfileChange): Promise<() => Promise<void>> {
  const edited = change.profile;
  const undo: (() => Promise<void>)[] = [];
  const back = async () => {
    for (const step of undo.reverse()) await step().catch(() => undefined);
  };
  if (!edited) return back;
  try {
    for (const stored of await manager.records.list(change.project)) {
      if (!stored.doc.profiles.includes(change.name)) continue;
      const profiles = await manager.loadProfiles(change.project, stored.doc.profiles);
      const before = expandDevices(profiles, stored.doc.devices);
      const after = expandDevices(profiles.map((p) => (p.name === change.name ? edited : p)), stored.doc.devices);
      const vol = { type: stored.doc.type, project: change.project, name: stored.name };
      undo.push(await applyRootQuota(storage, stored.doc.pool, vol, before, after));
    }
  } catch (err) {
    await back();
    throw err;
  }
  return back;
}
