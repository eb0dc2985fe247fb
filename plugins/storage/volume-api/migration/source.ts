/**
 * The sending end of a custom volume's migration (`POST .../volumes/custom/<name>` with
 * `migration: true`). Pull mode: a websocket operation whose metadata holds the `control` and `fs`
 * secrets for the target to connect with. Push mode (a `target` object): a task that connects to the
 * target's operation. Either way the volume's snapshots (oldest first, unless `volume_only`) and then
 * the volume go over rsync, and the volume is held against delete, rename and move until the target
 * has answered.
 */
import { badRequest, type ApiRequest, type Operation, type PluginContext } from '../../../../sdk/index.js';
import { relaySocketDir, runSource } from '../../../../sdk/lib/migration/index.js';
import { linkedOperation, type MigrationLink } from '../../../../sdk/lib/migration/linked-operation.js';
import { parsePeer } from '../../../../sdk/lib/migration/peer.js';
import type { VolumeManager } from '../../volumes.js';
import { customRef, type CustomVolumes } from '../custom-volumes.js';
import { volumeUrl } from '../record.js';
import { volumeSnapshotMessage } from './snapshot-messages.js';

export interface VolumeSendRequest {
  pool: string;
  project: string;
  name: string;
  volumeOnly: boolean;
  /** Push mode: the target's operation, certificate and secrets (the request's `target`). */
  target?: Record<string, unknown>;
}

async function sendVolume(
  ctx: PluginContext, custom: CustomVolumes, volumes: VolumeManager, ask: VolumeSendRequest,
  { control, fs }: MigrationLink, signal: AbortSignal,
): Promise<void> {
  await custom.whileMigrating(ask.project, ask.pool, ask.name, async () => {
    // Read again: the volume may have changed while the target was connecting.
    const entry = custom.get(ask.project, ask.pool, ask.name);
    const snapshots = ask.volumeOnly ? [] : custom.catalog.snapshotsOf(ask.project, ask.pool, ask.name).map((s) => s.doc);
    const ref = customRef(ask.project, ask.name);
    await runSource(ctx.hostTools, control, fs, {
      offer: { snapshotNames: snapshots.map((s) => s.name), snapshots: snapshots.map(volumeSnapshotMessage) },
      snapshotDir: (name) => volumes.snapshotPath(ask.pool, ref, name),
      mainDir: () => custom.path(ask.pool, ask.project, entry.doc.name),
    }, await relaySocketDir(ctx.dataDir), signal);
  });
}

export function volumeMigrationSource(ctx: PluginContext, custom: CustomVolumes, volumes: VolumeManager, req: ApiRequest, ask: VolumeSendRequest): Operation {
  const entry = custom.get(ask.project, ask.pool, ask.name);
  if (entry.doc.contentType === 'block') throw badRequest('Block volumes cannot be migrated to another server by this build');
  const common = {
    description: 'Migrating storage volume', request: req, requestor: req.requestor,
    resources: { storage_volumes: [volumeUrl(ask.pool, 'custom', ask.name, ask.project)] },
  };
  // Push mode (a target object): we connect to the target's operation; pull mode: it connects to ours
  // (and a client may cancel while it waits).
  return linkedOperation(ctx.operations, ctx.dataDir, {
    ...common, mayCancel: !ask.target, peer: ask.target ? parsePeer(ask.target, 'migration target') : undefined,
    work: (link, op) => sendVolume(ctx, custom, volumes, ask, link, op.signal),
  });
}
