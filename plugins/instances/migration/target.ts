/**
 * The receiving end (`POST /1.0/instances` with a `migration` source): in pull mode it connects to
 * the source's websockets; in push mode it answers a websocket operation the source connects to.
 * Then it takes the offer, receives the snapshots' and the instance's trees into a new volume, and
 * writes the instance and snapshot records; any failure removes all of it and tells the source. The
 * instance's own config, devices and profiles come from the request (the client copies them from the
 * source); the snapshots' come from the header.
 */
import { type ApiRequest, type Operation, type OperationControl, type PluginContext } from '../../../sdk/index.js';
import { acceptOffer, btrfsStreamFrom, finishTarget, FsType, receiveBtrfsHeader, receiveOne, receiveOver } from '../../../sdk/lib/migration/index.js';
import { progressReporter } from '../../../sdk/lib/operations/index.js';
import type { CreateSpec, InstanceManager } from '../manager.js';
import { NEVER } from '../record.js';
import { operationResources } from '../routes/paths.js';
import { linkedOperation, type MigrationLink } from '../../../sdk/lib/migration/linked-operation.js';
import { pullSource, pushSource } from './pull-source.js';
import { refreshInstance } from './refresh.js';
import { poolTransfer } from './pool-transfer.js';
import type { SnapshotManager } from '../snapshots/manager.js';
import { headerShift, snapshotShift, unshiftReceived } from './shifted.js';
import { keepOnReceive, snapshotRecord, unpairConfig } from './snapshot-messages.js';
import { SnapshotStaging } from './staging.js';
import { vettedTarget } from '../placement.js';

const PROGRESS_TICK_MS = 250;


/** Both modes once the sockets are open: offer, trees, records, verdict. */
async function receiveInstance(
  ctx: PluginContext, manager: InstanceManager, req: ApiRequest, spec: CreateSpec, pool: string,
  link: MigrationLink, instanceOnly: boolean, op: OperationControl,
): Promise<void> {
  const staging = new SnapshotStaging(ctx.hostTools);
  try {
    const transfer = await poolTransfer(manager.deps.storage, pool);
    const offer = await acceptOffer(link.control, op.signal, undefined, { btrfs: transfer.btrfs, compress: transfer.rsync.compress, instanceOnly });
    // An instance-only copy drops whatever snapshots a source sends anyway.
    const wanted = instanceOnly ? [] : offer.snapshots;
    const records = offer.header.snapshots ?? [];
    spec.snapshots = wanted.map((name, i) => {
      const rec = records[i] ? snapshotRecord(records[i], spec.architecture) : snapshotRecord({ name, ephemeral: false, architecture: 0, stateful: false }, spec.architecture);
      return { ...rec, config: keepOnReceive(rec.config), last_used_at: NEVER };
    });
    const fs = link.fs;
    const instanceShift = headerShift(offer.header);
    const shiftOf = (i: number) => snapshotShift(unpairConfig(records[i]?.localConfig), instanceShift);
    if (offer.fs === FsType.BTRFS) {
      // Streams go into the pool's scratch (btrfs receive confined there), each must make one subvolume,
      // which is then moved into place; the list the source announces is checked first.
      if (offer.btrfsHeader) await receiveBtrfsHeader(fs, offer.snapshots, op.signal, offer.bounds?.idleMs);
      spec.source = {
        kind: 'receive', format: 'btrfs', snapshots: offer.snapshots,
        open: async () => btrfsStreamFrom(fs, op.signal, offer.bounds?.idleMs),
        prepare: (dir, part) => unshiftReceived(dir, part === undefined ? instanceShift : shiftOf(offer.snapshots.indexOf(part))),
      };
    } else spec.source = {
      kind: 'fill',
      // Every tree arrives over the one before it in the new volume (rsync then moves only what
      // differs, as the reference receives); each wanted snapshot's tree is copied aside.
      fill: async (dir) => {
        const receive = async (tree: string, over = receiveOver) => {
          const bytes = await over(ctx.hostTools, dir, fs, offer, op.signal);
          ctx.log.debug({ instance: spec.name, tree, bytes }, 'migration tree received');
        };
        for (const [i, name] of offer.snapshots.entries()) {
          await receive(name);
          await unshiftReceived(dir, shiftOf(i));
          if (wanted.includes(name)) await staging.capture(dir, name);
        }
        await receive('');
        // The final sync brings what changed in the same tree while the first pass ran: never emptied first.
        if (offer.finalSync) await receive('', receiveOne);
        await unshiftReceived(dir, instanceShift);
      },
      snapshots: wanted.map((name) => ({ name, fill: (dir: string) => staging.handOver(name, dir) })),
    };
    // The bytes that came over fs stand for the progress, as the reference's `fs_progress` line shows them.
    const reporter = progressReporter(op, 'fs', spec.name, 0);
    const ticker = setInterval(() => reporter.update(fs.received), PROGRESS_TICK_MS);
    try {
      await manager.create(spec, pool, req);
    } finally {
      clearInterval(ticker);
      reporter.clear();
    }
    await finishTarget(link.control);
  } catch (err) {
    await finishTarget(link.control, err);
    throw err;
  } finally {
    await staging.cleanup();
  }
}

export async function migrationTargetOperation(
  ctx: PluginContext, manager: InstanceManager, snapshots: SnapshotManager, req: ApiRequest, spec: CreateSpec, source: Record<string, any>,
): Promise<Operation> {
  const push = (source.mode ?? 'pull') === 'push';
  const pull = push ? undefined : pullSource(source);
  const instanceOnly = push ? pushSource(source).instanceOnly : pull!.instanceOnly;
  const common = { description: 'Creating instance', project: req.project, requestor: req.requestor, resources: operationResources(spec.name) };
  if (source.refresh === true) {
    // A refresh of an instance we already have; without one, the copy is made whole.
    const existing = await manager.load(req.project, spec.name).catch(() => undefined);
    if (existing) {
      return linkedOperation(ctx.operations, ctx.dataDir, {
        ...common, description: 'Refreshing instance', peer: pull, work: (link, op) => refreshInstance(ctx, manager, snapshots, req, existing, link, op),
      });
    }
  }
  spec.origin = 'copy';
  const checked = await manager.check(req.project, spec.type, spec, { action: 'copy', name: spec.name, target: vettedTarget(ctx, req) });
  const release = await manager.reserve(req.project, spec.name);
  try {
    return linkedOperation(ctx.operations, ctx.dataDir, {
      ...common, peer: pull, work: (link, op) => receiveInstance(ctx, manager, req, spec, checked.pool, link, instanceOnly, op), release,
    });
  } catch (err) {
    release();
    throw err;
  }
}
