/**
 * A profile edit reaches running instances that use it: their live keys (limits) change at once.
 * Runs before the profile is written; if one instance refuses, those already changed go back and
 * the edit is refused, so the profile and what runs never disagree.
 */
import type { ProfileChange } from '../../sdk/index.js';
import { expandConfig } from './expand.js';
import { liveChanges } from './live-keys.js';
import type { InstanceManager } from './manager.js';

export async function applyProfileToRunning(manager: InstanceManager, change: ProfileChange): Promise<void> {
  const edited = change.profile;
  if (!edited) return;
  const undo: (() => Promise<void>)[] = [];
  try {
    for (const stored of await manager.records.list(change.project)) {
      if (!stored.doc.profiles.includes(change.name)) continue;
      const handle = await manager.handleFor(stored);
      if ((await handle.driver.status(handle.inst)) === 'Stopped' || !handle.driver.update) continue;
      const profiles = (await manager.loadProfiles(change.project, stored.doc.profiles))
        .map((p) => (p.name === change.name ? edited : p));
      const after = expandConfig(profiles, stored.doc.config);
      const changed = liveChanges(handle.inst.config, after);
      if (!Object.keys(changed).length) continue;
      await handle.driver.update(handle.inst, changed);
      const back = liveChanges(after, handle.inst.config);
      undo.push(() => handle.driver.update!(handle.inst, back));
    }
  } catch (err) {
    for (const step of undo.reverse()) await step().catch(() => undefined);
    throw err;
  }
}
