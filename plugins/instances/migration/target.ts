/**
 * The receiving end (`POST /1.0/instances` with a `migration` source): in pull mode it connects to
 * the source's websockets; in push mode it answers a websocket operation the source connects to.
 * Then it takes the offer, receives the snapshots' and the instance's trees into a new volume, and
 * writes the instance and snapshot records; any failure removes all of it and tells the source. The
 * instance's own config, devices and profiles come from the request (the client copies them from the
 * source); the snapshots' come from the header.
 */
import type { WebSocket } from 'ws';
import { type ApiRequest, type Operation, type OperationControl, type OperationSpec, type PluginContext } from '../../../sdk/index.js';
import { acceptOffer, btrfsStreamFrom, finishTarget, FsType, MigrationChannel, receiveBtrfsHeader, receiveOver } from '../../../sdk/lib/migration/index.js';
import { progressReporter } from '../../../sdk/lib/operations/index.js';
import type { CreateSpec, InstanceManager } from '../manager.js';
import { NEVER } from '../record.js';
import { operationResources } from '../routes/paths.js';
import { connectPeer, type PeerLink } from '../../../sdk/lib/migration/peer.js';
import { pullSource, pushSource, type PullSource } from './pull-source.js';
import { refreshInstance } from './refresh.js';
import { poolTransfer } from './pool-transfer.js';
import type { SnapshotManager } from '../snapshots/manager.js';
import { headerShift, snapshotShift, unshiftReceived } from './shifted.js';
import { keepOnReceive, snapshotRecord, unpairConfig } from './snapshot-messages.js';
import { SnapshotStaging } from './staging.js';

const PROGRESS_TICK_MS = 250;


/** Both modes once the sockets are open: offer, trees, records, verdict. */
async function receiveInstance(
  ctx: PluginContext, manager: InstanceManager, req: ApiRequest, spec: CreateSpec, pool: string,
  link: Pick<PeerLink, 'control' | 'fs'>, instanceOnly: boolean, op: OperationControl,
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
        const receive = async (tree: string) => {
          const bytes = await receiveOver(ctx.hostTools, dir, fs, offer, op.signal);
          ctx.log.debug({ instance: spec.name, tree, bytes }, 'migration tree received');
        };
        for (const [i, name] of offer.snapshots.entries()) {
          await receive(name);
          await unshiftReceived(dir, shiftOf(i));
          if (wanted.includes(name)) await staging.capture(dir, name);
        }
        await receive('');
        if (offer.finalSync) await receive('');
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

/** Sockets either way: push mode waits for the source on a websocket operation, pull mode connects to it. */
function linkedOperation(
  ctx: PluginContext, common: Pick<OperationSpec, 'description' | 'project' | 'requestor' | 'resources'>, pull: PullSource | undefined,
  work: (link: Pick<PeerLink, 'control' | 'fs'>, op: OperationControl) => Promise<void>, release: () => void,
): Operation {
  // Whatever way the operation ends (a source that never connects ends it without running), the name is given back once.
  let released = false;
  const releaseOnce = () => {
    if (!released) release();
    released = true;
  };
  let created: Operation;
  if (!pull) {
    // The source connects to us: control and fs secrets at the metadata's top, as its client reads them.
    const sockets: Partial<Record<'control' | 'fs', MigrationChannel>> = {};
    created = ctx.operations.create({
      ...common,
      class: 'websocket',
      secrets: ['control', 'fs'],
      secretsAtTop: true,
      connect: (name: string, socket: WebSocket) => {
        if (name === 'control' || name === 'fs') sockets[name] = new MigrationChannel(socket, name);
      },
      run: async (op) => {
        const link = { control: sockets.control!, fs: sockets.fs! };
        try {
          await work(link, op);
        } finally {
          link.control.close();
          link.fs.close();
          releaseOnce();
        }
      },
    });
  } else {
    created = ctx.operations.create({
      ...common,
      class: 'task',
      run: async (op) => {
        try {
          const link = await connectPeer(ctx.dataDir, pull, op.signal);
          try {
            await work(link, op);
          } finally {
            link.close();
          }
        } finally {
          releaseOnce();
        }
      },
    });
  }
  void created.done().then(releaseOnce);
  return created;
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
    if (existing) return linkedOperation(ctx, { ...common, description: 'Refreshing instance' }, pull, (link, op) => refreshInstance(ctx, manager, snapshots, req, existing, link, op), () => {});
  }
  spec.origin = 'copy';
  const checked = await manager.check(req.project, spec.type, spec, { action: 'copy', name: spec.name, target: req.target });
  const release = await manager.reserve(req.project, spec.name);
  try {
    return linkedOperation(ctx, common, pull, (link, op) => receiveInstance(ctx, manager, req, spec, checked.pool, link, instanceOnly, op), release);
  } catch (err) {
    release();
    throw err;
  }
}
