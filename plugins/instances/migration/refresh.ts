/**
 * A refresh by migration (`lxc copy --refresh` to another daemon): the target instance exists and is
 * stopped; it asks only for the source's snapshots it lacks. Each arrives into the instance's volume
 * and is snapshotted there (rsync then moves only what differs), then the instance's tree comes last.
 * Its own snapshots stay, as with a local refresh.
 */
import { acceptOffer, finishTarget, receiveOne } from '../../../sdk/lib/migration/index.js';
import { badRequest, type ApiRequest, type OperationControl, type PluginContext } from '../../../sdk/index.js';
import type { InstanceHandle } from '../access.js';
import type { InstanceManager } from '../manager.js';
import { NEVER } from '../record.js';
import type { SnapshotManager } from '../snapshots/manager.js';
import { snapshotKey } from '../snapshots/record.js';
import type { MigrationLink } from '../../../sdk/lib/migration/linked-operation.js';
import { poolTransfer } from './pool-transfer.js';
import { headerShift, snapshotShift, unshiftReceived } from './shifted.js';
import { keepOnReceive, snapshotRecord, unpairConfig } from './snapshot-messages.js';


export async function refreshInstance(
  ctx: PluginContext, manager: InstanceManager, snapshots: SnapshotManager, req: ApiRequest, existing: InstanceHandle,
  link: MigrationLink, op: OperationControl,
): Promise<void> {
  await manager.lock.run(`${existing.project}/${existing.name}`, async () => {
    try {
      const target = await manager.load(existing.project, existing.name);
      if ((await target.driver.status(target.inst)) !== 'Stopped') throw badRequest('The target instance is running; stop it before a refresh');
      const have = new Set((await snapshots.list(target)).map((s) => s.doc.name));
      const storage = manager.deps.storage;
      const pool = target.record.pool;
      // A refresh goes by rsync whatever the pools (only what differs moves); the pool says whether to compress.
      const offer = await acceptOffer(link.control, op.signal, have, { compress: (await poolTransfer(storage, pool)).rsync.compress });
      const vol = { type: target.record.type, project: target.project, name: target.name };
      const dir = await storage.volumePath(pool, vol);
      const records = offer.header.snapshots ?? [];
      const instanceShift = headerShift(offer.header);
      for (const [i, name] of offer.snapshots.entries()) {
        const rec = records[i] ? snapshotRecord(records[i], target.record.architecture) : snapshotRecord({ name, ephemeral: false, architecture: 0, stateful: false }, target.record.architecture);
        await receiveOne(ctx.hostTools, dir, link.fs, offer, op.signal);
        await unshiftReceived(dir, snapshotShift(unpairConfig(records[i]?.localConfig), instanceShift));
        await storage.createSnapshot(pool, vol, name);
        await snapshots.records.put(target.project, snapshotKey(target.name, name), { ...rec, config: keepOnReceive(rec.config), last_used_at: NEVER }, 0);
      }
      await receiveOne(ctx.hostTools, dir, link.fs, offer, op.signal);
      if (offer.finalSync) await receiveOne(ctx.hostTools, dir, link.fs, offer, op.signal);
      await unshiftReceived(dir, instanceShift);
      manager.lifecycle('instance-updated', target, req, { refreshed_by: 'migration' });
      await finishTarget(link.control);
    } catch (err) {
      await finishTarget(link.control, err);
      throw err;
    }
  });
}
