/**
 * Moving a stopped instance's root volume (and its snapshots) to another pool. The copy is made
 * first, the record switched second, the old volume removed last: after a crash at any point the
 * record names a whole volume, and the boot cleanup removes the copy the record does not name.
 */
import type { ApiRequest } from '../../sdk/index.js';
import type { InstanceHandle } from './access.js';
import { withRootOn } from './devices/disk.js';
import type { InstanceManager } from './manager.js';
import type { SnapshotManager } from './snapshots/manager.js';

export async function moveToPool(manager: InstanceManager, snapshots: SnapshotManager, handle: InstanceHandle, pool: string, req?: ApiRequest): Promise<InstanceHandle> {
  const storage = manager.deps.storage;
  const from = handle.record.pool;
  const vol = { type: handle.record.type, project: handle.project, name: handle.name };
  const names = (await snapshots.list(handle)).map((s) => s.doc.name);
  // A move keeps what the volume carries, description included (a copy would start it empty).
  const state = await storage.volumeState(from, vol);
  await storage.createInstanceVolume(pool, vol, { kind: 'copy', pool: from, volume: vol, snapshots: names }, state);
  try {
    await manager.touch(handle.project, handle.name, (r) => {
      r.pool = pool;
      r.devices = withRootOn(r.devices, pool, from);
    });
  } catch (err) {
    await storage.deleteVolume(pool, vol).catch(() => {});
    throw err;
  }
  await storage.deleteVolume(from, vol).catch((err) => manager.log.warn({ err, pool: from }, 'removing the moved volume from its old pool failed'));
  manager.lifecycle('instance-updated', handle, req, { 'storage-pool': pool });
  return manager.load(handle.project, handle.name);
}
