/**
 * A profile edit reaches running instances that use it: their live keys (limits) change at once,
 * and devices of hot-pluggable types (NICs, proxies) are plugged and unplugged.
 * Runs before the profile is written; if one instance refuses, those already changed go back and
 * the edit is refused, so the profile and what runs never disagree.
 */
import type { ProfileChange } from '../../sdk/index.js';
import { expandConfig, expandDevices } from './expand.js';
import { applyVolatile } from './device-runtime.js';
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
      if (Object.keys(changed).length) {
        await handle.driver.update(handle.inst, changed);
        const back = liveChanges(after, handle.inst.config);
        undo.push(() => handle.driver.update!(handle.inst, back));
      }
      // Devices the profile adds, changes or removes are hot-plugged where their type allows it.
      const devices = expandDevices(profiles, stored.doc.devices);
      const volatile = await manager.deviceRuntime.hotplug(handle, handle.inst.devices, devices, handle.inst.config);
      if (Object.keys(volatile).length) await manager.touch(handle.project, handle.name, (r) => applyVolatile(r.config, volatile));
      undo.push(async () => void await manager.deviceRuntime.hotplug(handle, devices, handle.inst.devices, { ...handle.inst.config, ...volatile }));
    }
  } catch (err) {
    for (const step of undo.reverse()) await step().catch(() => undefined);
    throw err;
  }
}
