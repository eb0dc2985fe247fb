/**
 * The sending end (`POST /1.0/instances/<name>` with `migration: true`): a websocket operation whose
 * metadata holds the `control` and `fs` secrets; once the target opened both, the instance's snapshots
 * and then its volume go over rsync (a running one stateless: the volume twice). The instance stays
 * locked, so no operation changes it meanwhile.
 */
import { badRequest, type ApiRequest, type Operation, type PluginContext } from '../../../sdk/index.js';
import { relaySocketDir, runSource } from '../../../sdk/lib/migration/index.js';
import type { InstanceHandle } from '../access.js';
import type { InstanceManager } from '../manager.js';
import type { PowerControl } from '../power.js';
import type { SnapshotManager } from '../snapshots/manager.js';
import { operationResources } from '../routes/paths.js';
import { snapshotMessage } from './snapshot-messages.js';
import { linkedOperation, type MigrationLink } from '../../../sdk/lib/migration/linked-operation.js';
import { pushTarget } from './pull-source.js';
import { poolTransfer } from './pool-transfer.js';

export interface MigrationSourceRequest {
  live: boolean;
  instanceOnly: boolean;
  /** Push mode: the target's operation, certificate and secrets (the request's `target` object). */
  target?: Record<string, unknown>;
  /** A snapshot sent as the instance's tree (`POST /1.0/instances/<name>/snapshots/<snapshot>` with `migration`). */
  snapshot?: string;
}

/** Both modes once the sockets are open: offer the instance, send its trees, take the target's verdict. */
async function sendInstance(
  ctx: PluginContext, manager: InstanceManager, power: PowerControl, snapshots: SnapshotManager,
  handle: InstanceHandle, ask: MigrationSourceRequest, { control, fs }: MigrationLink, signal: AbortSignal,
): Promise<void> {
  await manager.lock.run(`${handle.project}/${handle.name}`, async () => {
    const fresh = await manager.load(handle.project, handle.name);
    // A snapshot never runs and goes alone; it is checked again under the lock (it may have gone meanwhile).
    const snapshot = ask.snapshot;
    if (snapshot !== undefined) await snapshots.load(fresh, snapshot);
    // A running instance goes stateless: its files as they are, twice (the target expects that).
    const running = snapshot === undefined && (await power.status(fresh)) !== 'Stopped';
    const owned = ask.instanceOnly || snapshot !== undefined ? [] : (await snapshots.list(fresh)).map((s) => s.doc);
    const storage = manager.deps.storage;
    const vol = { type: fresh.record.type, project: fresh.project, name: fresh.name };
    const pool = fresh.record.pool;
    const transfer = await poolTransfer(storage, pool);
    // A snapshot's tree goes by rsync: a btrfs stream of the volume would carry the instance, not the snapshot.
    const btrfs = transfer.btrfs && snapshot === undefined;
    await runSource(ctx.hostTools, control, fs, {
      offer: {
        snapshotNames: owned.map((s) => s.name),
        snapshots: owned.map(snapshotMessage),
        // The rootfs is mounted idmapped here, never shifted on disk: no map to announce.
        idmap: [],
      },
      running,
      snapshotDir: (name) => storage.snapshotPath(pool, vol, name),
      mainDir: () => (snapshot === undefined ? storage.volumePath(pool, vol) : storage.snapshotPath(pool, vol, snapshot)),
      ...(btrfs ? { sendBtrfs: (names, write) => storage.sendVolume(pool, vol, names, write) } : {}),
      rsync: transfer.rsync,
    }, await relaySocketDir(ctx.dataDir), signal);
  });
}

export async function migrationSourceOperation(
  ctx: PluginContext, manager: InstanceManager, power: PowerControl, snapshots: SnapshotManager,
  req: ApiRequest | undefined, handle: InstanceHandle, ask: MigrationSourceRequest,
): Promise<Operation> {
  if (ask.live) throw badRequest('Live migration is not supported by this build; stop the instance or copy it stateless');
  // No request: a move the daemon makes itself (a cluster member's evacuation).
  const common = { description: ask.snapshot === undefined ? 'Migrating instance' : 'Transferring snapshot', request: req, requestor: req?.requestor, project: handle.project, resources: operationResources(handle.name) };
  // Push mode (a target object): we connect to the target's operation; pull mode: it connects to ours
  // (and a client may cancel while it waits).
  return linkedOperation(ctx.operations, ctx.dataDir, {
    // A snapshot's source is not cancellable, as in the reference (it ends when its peer fails to connect in time).
    ...common, mayCancel: !ask.target && ask.snapshot === undefined, peer: ask.target ? pushTarget(ask.target) : undefined,
    work: (link, op) => sendInstance(ctx, manager, power, snapshots, handle, ask, link, op.signal),
  });
}
