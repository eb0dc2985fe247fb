/**
 * Records made before clustering name no member. When this server becomes the first member (or boots
 * as one), it claims those whose volume it holds; a joiner arrives bare and claims nothing.
 */
import { stat } from 'node:fs/promises';
import type { PluginContext, StoredDoc } from '../../sdk/index.js';
import type { InstanceManager } from './manager.js';
import type { InstanceRecord } from './record.js';
import { unplaced } from './location.js';

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

/** The member `from` was renamed `to`: the records it holds name it anew (run by the renamed member). */
export async function followRename(manager: InstanceManager, from: string, to: string): Promise<void> {
  for (const stored of await manager.records.list()) {
    if (stored.doc.location !== from) continue;
    await manager.touch(stored.project, stored.name, (record) => {
      if (record.location === from) record.location = to;
    });
  }
}

/** Follow the cluster identity: claim on enable, follow a rename of this member; one change handled at a time. */
export function followClusterIdentity(ctx: PluginContext, manager: InstanceManager): () => void {
  let running: Promise<void> = Promise.resolve();
  let was = { enabled: ctx.cluster.enabled, name: ctx.cluster.serverName };
  return ctx.cluster.onChange(() => {
    const now = { enabled: ctx.cluster.enabled, name: ctx.cluster.serverName };
    const before = was;
    was = now;
    let step: (() => Promise<void>) | undefined;
    if (now.enabled && !before.enabled) step = () => claimUnplaced(ctx, manager);
    else if (now.enabled && before.enabled && now.name !== before.name) step = () => followRename(manager, before.name, now.name);
    if (step) running = running.then(step).catch((err) => ctx.log.error({ err }, 'updating the location of this member\'s instances failed'));
  });
}
