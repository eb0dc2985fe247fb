/**
 * A profile edit must leave every instance that uses it valid, running or not: expanded with the
 * new content, each one still passes the checks an edit of the instance itself would, and keeps
 * its root disk on the pool its volume lives on. Otherwise the edit is refused before anything is
 * written (the reference refuses the root disk case the same way, stopped instances included).
 */
import { ApiError, badRequest, type ProfileChange, type StoredDoc } from '../../sdk/index.js';
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
    let pool: string;
    try {
      ({ pool } = await manager.check(stored.project, record.type, record, undefined, profiles));
    } catch (err) {
      if (err instanceof ApiError && err.status < 500) throw new ApiError(err.status, `${what} and would be left invalid: ${err.message}`);
      throw err;
    }
    if (pool !== record.pool) throw badRequest(`${what} and its root disk would move from pool "${record.pool}" to "${pool}"`);
  }
}
