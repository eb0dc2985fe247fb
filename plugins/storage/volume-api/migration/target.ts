/**
 * The receiving end of a custom volume's migration (`POST .../volumes/custom` with a `migration`
 * source). Pull mode connects to the source's operation; push mode is a websocket operation the
 * source connects to. The wire brings each snapshot's tree (oldest first), then the volume's: each
 * tree is received into the new volume and a snapshot taken of it there, so rsync only moves what
 * differs from the tree before. The volume is made under its scratch name and takes its real name
 * with its records once whole; any failure removes all of it and tells the source. Config and
 * description come from the request (the client copies them from the source volume), the
 * snapshots' config and dates from the header. A source that shifts ids on disk (the reference, once
 * the volume was attached) says by which map in `volatile.idmap.last`; the trees are shifted back.
 */
import path from 'node:path';
import {
  badRequest, canSnapshot, conflict, optionalBool, type ApiRequest, type Operation, type OperationControl, type PluginContext,
} from '../../../../sdk/index.js';
import { acceptOffer, finishTarget, receiveOver, type TargetOffer } from '../../../../sdk/lib/migration/index.js';
import { linkedOperation, type MigrationLink } from '../../../../sdk/lib/migration/linked-operation.js';
import { parsePeer, type MigrationPeer } from '../../../../sdk/lib/migration/peer.js';
import { progressReporter } from '../../../../sdk/lib/operations/index.js';
import { parseShift, unshiftTree } from '../../../../sdk/lib/storage/index.js';
import type { IdmapEntry } from '../../../../sdk/index.js';
import type { PoolManager } from '../../pools.js';
import type { VolumeManager } from '../../volumes.js';
import { customRef, type CustomVolumes, type NewVolume } from '../custom-volumes.js';
import { checkVolumeSnapshotName } from '../names.js';
import { volumeUrl } from '../record.js';
import { receivedSnapshot } from './snapshot-messages.js';

const PROGRESS_TICK_MS = 250;

export interface VolumeReceiveRequest {
  pool: string;
  project: string;
  volume: NewVolume;
  /** The request's `source` (type migration). */
  source: Record<string, unknown>;
}

type Link = MigrationLink;

export interface VolumeTargetDeps {
  ctx: PluginContext;
  pools: PoolManager;
  volumes: VolumeManager;
  custom: CustomVolumes;
}

/**
 * The map a snapshot's tree is shifted by on the source: its own `volatile.idmap.last` (the volume's
 * config when it was taken), else the volume's (ids below the map's host range are left as they are,
 * so an unshifted tree comes through unchanged).
 */
function snapshotShift(offer: TargetOffer, index: number, volumeShift: IdmapEntry[]): IdmapEntry[] {
  const own = offer.header.snapshots?.[index]?.localConfig?.find((p) => p.key === 'volatile.idmap.last')?.value;
  return own === undefined ? volumeShift : parseShift(own, 'A snapshot\'s "volatile.idmap.last"');
}

/**
 * Every tree the source sends, in order, each shifted back to container ids when the source keeps
 * them shifted on disk; `snapshot(name)` is called after each snapshot's tree arrived.
 */
async function receiveAll(
  deps: VolumeTargetDeps, dir: string, link: Link, offer: TargetOffer, signal: AbortSignal, volumeShift: IdmapEntry[],
  snapshot: (name: string, index: number) => Promise<void>,
): Promise<void> {
  const receive = async (tree: string) => {
    const bytes = await receiveOver(deps.ctx.hostTools, dir, link.fs, offer, signal);
    deps.ctx.log.debug({ volume: path.basename(dir), tree, bytes }, 'migration tree received');
  };
  for (const [i, name] of offer.snapshots.entries()) {
    await receive(name);
    await unshiftTree(dir, snapshotShift(offer, i, volumeShift));
    await snapshot(name, i);
  }
  await receive('');
  if (offer.finalSync) await receive('');
  await unshiftTree(dir, volumeShift);
}

/** The source's bytes as the operation's `fs_progress`, while `work` runs. */
async function withProgress<T>(op: OperationControl, link: Link, label: string, work: () => Promise<T>): Promise<T> {
  const reporter = progressReporter(op, 'fs', label, 0);
  const ticker = setInterval(() => reporter.update(link.fs.received), PROGRESS_TICK_MS);
  try {
    return await work();
  } finally {
    clearInterval(ticker);
    reporter.clear();
  }
}

async function receiveNew(deps: VolumeTargetDeps, req: ApiRequest, ask: VolumeReceiveRequest, volumeOnly: boolean, shift: IdmapEntry[], link: Link, op: OperationControl): Promise<void> {
  const { pool, project, volume } = ask;
  const offer = await acceptOffer(link.control, op.signal);
  for (const name of offer.snapshots) checkVolumeSnapshotName(name);
  const records = offer.header.snapshots ?? [];
  const kept = volumeOnly ? [] : offer.snapshots;
  const { driver } = await deps.pools.usable(pool);
  if (kept.length && !canSnapshot(driver)) throw badRequest(`Storage pool "${pool}" cannot hold the volume's snapshots`);
  // An empty scratch volume first: each tree is received into it whole and snapshotted there (a
  // driver may fill a new volume away from its final place, where it cannot be snapshotted yet).
  const nothing = async () => {};
  await withProgress(op, link, volume.name, () => deps.custom.createFilled(
    pool, project, volume, { kind: 'fill', fill: nothing },
    kept.map((name) => receivedSnapshot(records[offer.snapshots.indexOf(name)], name, volume.description)), req.requestor,
    async (scratch) => {
      const dir = await deps.volumes.volumePath(pool, scratch);
      await receiveAll(deps, dir, link, offer, op.signal, shift, async (name) => {
        if (kept.includes(name)) await deps.volumes.createSnapshot(pool, scratch, name);
      });
    },
  ));
}

/**
 * A refresh (`--refresh`) of a volume we have: the source sends only the snapshots we lack, and the
 * volume's tree. Snapshots made here are removed again if the transfer fails; the volume's own
 * tree may then be half-updated, as the reference leaves it.
 */
async function receiveRefresh(deps: VolumeTargetDeps, req: ApiRequest, ask: VolumeReceiveRequest, volumeOnly: boolean, shift: IdmapEntry[], link: Link, op: OperationControl): Promise<void> {
  const { pool, project, volume } = ask;
  const { custom, volumes } = deps;
  await custom.whileMigrating(project, pool, volume.name, async () => {
    const have = new Set(custom.catalog.snapshotsOf(project, pool, volume.name).map((s) => s.doc.name));
    const offer = await acceptOffer(link.control, op.signal, have);
    for (const name of offer.snapshots) checkVolumeSnapshotName(name);
    const records = offer.header.snapshots ?? [];
    const ref = customRef(project, volume.name);
    const dir = await custom.path(pool, project, volume.name);
    const made: string[] = [];
    try {
      await withProgress(op, link, volume.name, () => receiveAll(deps, dir, link, offer, op.signal, shift, async (name, i) => {
        if (volumeOnly) return;
        await volumes.createSnapshot(pool, ref, name);
        made.push(name);
        const rec = receivedSnapshot(records[i], name, custom.get(project, pool, volume.name).doc.description);
        await custom.catalog.putSnapshot(project, {
          pool, volume: volume.name, name, description: rec.description, config: rec.config, contentType: volume.contentType,
          createdAt: rec.createdAt ?? new Date().toISOString(), expiresAt: rec.expiresAt,
        });
      }));
    } catch (err) {
      for (const name of made.reverse()) {
        await custom.catalog.deleteSnapshot(project, pool, volume.name, name).catch(() => {});
        await volumes.deleteSnapshot(pool, ref, name).catch(() => {});
      }
      throw err;
    }
  });
  deps.ctx.events.lifecycle('storage-volume-updated', volumeUrl(pool, 'custom', volume.name, project), { project, requestor: req.requestor });
}

/**
 * Checks the request before anything starts, then answers with the operation: a task that connects
 * to the source (pull), or a websocket operation the source connects to (push).
 */
export async function volumeMigrationTarget(deps: VolumeTargetDeps, req: ApiRequest, ask: VolumeReceiveRequest): Promise<Operation> {
  const { ctx, custom } = deps;
  const { pool, project, volume, source } = ask;
  const mode = source.mode ?? 'pull';
  if (mode !== 'pull' && mode !== 'push') throw badRequest(`Migration mode "${String(mode)}" is not supported; use pull or push`);
  if (volume.contentType === 'block') throw badRequest('Block volumes cannot be migrated from another server by this build');
  const peer: MigrationPeer | undefined = mode === 'pull' ? parsePeer(source, 'migration source') : undefined;
  const volumeOnly = optionalBool(source.volume_only, 'source.volume_only') ?? false;
  const refresh = optionalBool(source.refresh, 'source.refresh') ?? false;
  const existing = custom.catalog.find(project, pool, volume.name);
  if (existing && !refresh) throw conflict(`Storage volume "${volume.name}" already exists on pool "${pool}"`);
  if (existing && existing.doc.contentType !== volume.contentType) throw badRequest('A refresh needs source and target volumes of the same content type');
  // The source's volatile keys describe its own disk: the map its files are shifted by (once the
  // volume was attached there) is used to shift them back; none of them is kept.
  const shift = parseShift(volume.config['volatile.idmap.last'], 'The source volume\'s "volatile.idmap.last"');
  const config = Object.fromEntries(Object.entries(volume.config).filter(([k, v]) => v !== '' && !k.startsWith('volatile.')));
  if (!existing) await custom.checkNew(pool, project, volume.name, config, volume.contentType);
  const work = (link: Link, op: OperationControl) => (existing
    ? receiveRefresh(deps, req, ask, volumeOnly, shift, link, op)
    : receiveNew(deps, req, { ...ask, volume: { ...volume, config } }, volumeOnly, shift, link, op));
  // Whatever fails after the sockets are open is told to the source before the operation ends.
  const verdict = async (link: Link, op: OperationControl) => {
    try {
      await work(link, op);
    } catch (err) {
      await finishTarget(link.control, err);
      throw err;
    }
    await finishTarget(link.control);
  };
  const common = {
    description: existing ? 'Refreshing storage volume' : 'Creating storage volume', request: req, requestor: req.requestor,
    resources: { storage_volumes: [volumeUrl(pool, 'custom', volume.name, project)] },
  };
  return linkedOperation(ctx.operations, ctx.dataDir, { ...common, peer, work: verdict });
}
