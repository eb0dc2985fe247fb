/**
 * A profile edit changes the expanded config of every instance that uses the profile: each
 * instance's driver judges its new expanded config (raw.lxc through liblxc...) before the profile is
 * written, so an edit no instance could start with is refused instead of stored.
 */
import { badRequest, type ApiError, type ProfileChange, type StoredDoc } from '../../sdk/index.js';
import { expandConfig } from './expand.js';
import type { InstanceManager } from './manager.js';
import type { InstanceRecord } from './record.js';

export async function validateProfileUsers(manager: InstanceManager, change: ProfileChange, users: StoredDoc<InstanceRecord>[]): Promise<void> {
  const edited = change.profile;
  if (!edited) return;
  for (const stored of users) {
    if (!stored.doc.profiles.includes(change.name)) continue;
    const driver = manager.deps.drivers.get(stored.doc.type);
    if (!driver?.validate) continue;
    const profiles = await manager.loadProfiles(change.project, stored.doc.profiles);
    const before = expandConfig(profiles, stored.doc.config);
    const after = expandConfig(profiles.map((p) => (p.name === change.name ? edited : p)), stored.doc.config);
    if (sameConfig(before, after)) continue;
    try {
      await driver.validate(after);
    } catch (err) {
      const message = (err as ApiError).message ?? String(err);
      throw badRequest(`The profile change would not suit instance "${stored.doc.name}" (project "${stored.project}"): ${message}`);
    }
  }
}

function sameConfig(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) if (a[k] !== b[k]) return false;
  return true;
}
