/**
 * Which cluster member an instance lives on. The record's `location` names it; on a standalone
 * server every instance is this server's ("none", as the reference shows it). Records older than
 * clustering have no location: when this server becomes (or boots as) a cluster member, it claims
 * those whose volume it holds, so every record in the shared store names its member.
 */
import { stat } from 'node:fs/promises';
import type { ClusterView, PluginContext, StoredDoc } from '../../sdk/index.js';
import type { InstanceManager } from './manager.js';
import type { InstanceRecord } from './record.js';

/** What a standalone server calls itself, and the `location` of everything on it. */
export const STANDALONE_LOCATION = 'none';

const unplaced = (record: InstanceRecord): boolean => !record.location || record.location === STANDALONE_LOCATION;

/** The `location` the API shows for the instance. */
export function locationOf(cluster: ClusterView, record: InstanceRecord): string {
  if (!cluster.enabled) return STANDALONE_LOCATION;
  return unplaced(record) ? cluster.serverName : record.location!;
}

/**
 * Whether this server holds (runs, starts at boot, snapshots on schedule, backs up) the instance. In a
 * cluster an unplaced record is nobody's until the member with its volume claims it.
 */
export function isHere(cluster: ClusterView, record: InstanceRecord): boolean {
  return !cluster.enabled || record.location === cluster.serverName;
}

/** The member another member's request about this instance must go to; undefined when it is this one (or unknown). */
export function remoteLocation(cluster: ClusterView, record: InstanceRecord | undefined): string | undefined {
  if (!record || !cluster.enabled || unplaced(record) || record.location === cluster.serverName) return undefined;
  return record.location;
}

/** Claim the unplaced records whose volume is on this server (after enable, at a clustered boot). */
export async function claimUnplaced(ctx: PluginContext, manager: InstanceManager): Promise<void> {
  if (!ctx.cluster.enabled) return;
  const here = ctx.cluster.serverName;
  const candidates = (await manager.records.list()).filter((s) => unplaced(s.doc));
  for (const stored of candidates) {
    if (!(await holdsVolume(manager, stored))) continue;
    await manager.touch(stored.project, stored.name, (record) => {
      if (unplaced(record)) record.location = here;
    });
  }
}

async function holdsVolume(manager: InstanceManager, stored: StoredDoc<InstanceRecord>): Promise<boolean> {
  const dir = await manager.deps.storage.volumePath(stored.doc.pool, { type: stored.doc.type, project: stored.project, name: stored.name }).catch(() => undefined);
  return !!dir && (await stat(dir).then(() => true, () => false));
}

/** Follow the cluster identity: claim on enable; keep one claim running at a time. */
export function followClusterIdentity(ctx: PluginContext, manager: InstanceManager): () => void {
  let running: Promise<void> = Promise.resolve();
  let wasEnabled = ctx.cluster.enabled;
  return ctx.cluster.onChange(() => {
    const enabled = ctx.cluster.enabled;
    if (enabled && !wasEnabled) {
      running = running.then(() => claimUnplaced(ctx, manager)).catch((err) => ctx.log.error({ err }, 'claiming the instances of this member failed'));
    }
    wasEnabled = enabled;
  });
}
