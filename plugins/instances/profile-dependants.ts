/**
 * A profile edit must leave every instance that uses it valid, running or not. Its root disk comes
 * first: exactly one, on the pool its volume lives on (the reference refuses the same edits, stopped
 * instances included). Then, expanded with the new content, each instance must still pass the checks
 * an edit of the instance itself would. Otherwise the edit is refused before anything is written.
 */
import { ApiError, badRequest, type ProfileChange, type StoredDoc } from '../../sdk/index.js';
import { isRootDisk } from './devices/disk.js';
import { expandDevices } from './expand.js';
import type { InstanceManager } from './manager.js';
import type { InstanceRecord } from './record.js';

export async function checkProfileDependants(
  manager: InstanceManager, change: ProfileChange, users: () => Promise<StoredDoc<InstanceRecord>[]>,
): Promise<void> {
  const edited = change.profile;
  if (!edited) return;
  for (const stored of await users()) {
    const record = stored.doc;
    if (!record.profiles.includes(change.name)) continue;
    const profiles = (await manager.loadProfiles(stored.project, record.profiles)).map((p) => (p.name === change.name ? edited : p));
    const what = `Profile "${change.name}" cannot be changed this way: instance "${stored.name}"${stored.project === 'default' ? '' : ` of project "${stored.project}"`} uses it`;

    const roots = Object.values(expandDevices(profiles, record.devices)).filter(isRootDisk);
    if (roots.length === 0) throw badRequest(`${what} and would be left without a root disk`);
    if (roots.length > 1) throw badRequest(`${what} and would be left with more than one root disk`);
    if (roots[0]!.pool !== record.pool) throw badRequest(`${what} and its root disk would move from pool "${record.pool}" to "${roots[0]!.pool}"`);

    try {
      await manager.check(stored.project, record.type, record, undefined, profiles);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status >= 500) throw err;
      // An instance already broken before the edit (a device's source gone, say) is not this edit's doing.
      if (!(await manager.check(stored.project, record.type, record).then(() => true, () => false))) continue;
      throw new ApiError(err.status, `${what} and would be left invalid: ${err.message}`);
    }
  }
}
