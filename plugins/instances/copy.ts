/**
 * Local copies (`source.type` "copy"): from an instance, with or without its snapshots, or from
 * one snapshot; and refresh copies that bring an existing copy up to date. A copy gets fresh
 * volatile keys (uuid, id map, MAC addresses): only `volatile.base_image` carries over, and the copy
 * owes its `copy` templates at its first start (`volatile.apply_template`).
 */
import { badRequest, notFound, optionalBool, optionalString, type ApiRequest } from '../../sdk/index.js';
import type { InstanceHandle } from './access.js';
import type { CreateSpec, InstanceManager } from './manager.js';
import type { SnapshotManager } from './snapshots/manager.js';
import { NEVER } from './record.js';
import type { SnapshotRecord } from './snapshots/record.js';
import { APPLY_TEMPLATE_KEY } from './templates/deferred.js';

export interface CopyOrigin {
  handle: InstanceHandle;
  /** Set when copying from a snapshot. */
  snapshot?: SnapshotRecord;
  /** Snapshots to copy along (none for `instance_only` or a copy from a snapshot). */
  snapshots: SnapshotRecord[];
  refresh: boolean;
}

const keepOnCopy = (config: Record<string, string>) =>
  Object.fromEntries(Object.entries(config).filter(([k]) => !k.startsWith('volatile.') || k === 'volatile.base_image'));

/** A copied snapshot also keeps the templates its files still owe, which a restore brings back. */
const keepOnSnapshotCopy = (config: Record<string, string>) => {
  const kept = keepOnCopy(config);
  if (config[APPLY_TEMPLATE_KEY]) kept[APPLY_TEMPLATE_KEY] = config[APPLY_TEMPLATE_KEY];
  return kept;
};

/** Read and check the `source` of a copy request. */
export async function copyOrigin(manager: InstanceManager, snapshots: SnapshotManager, req: ApiRequest, source: Record<string, unknown>): Promise<CopyOrigin> {
  const from = optionalString(source.source, 'source.source');
  if (!from) throw badRequest('The copy source needs "source" (the instance or "instance/snapshot" to copy)');
  const project = optionalString(source.project, 'source.project') || req.project;
  const cut = from.indexOf('/');
  const instanceName = cut < 0 ? from : from.slice(0, cut);
  const handle = await manager.load(project, instanceName).catch(() => {
    throw notFound(`Source instance "${instanceName}" not found`);
  });
  const instanceOnly = optionalBool(source.instance_only, 'source.instance_only') || optionalBool(source.container_only, 'source.container_only') || false;
  const refresh = optionalBool(source.refresh, 'source.refresh') ?? false;
  optionalBool(source.live, 'source.live');
  if (cut >= 0) {
    const snapshot = (await snapshots.load(handle, from.slice(cut + 1)).catch(() => {
      throw notFound(`Source snapshot "${from}" not found`);
    })).doc;
    if (refresh) throw badRequest('A refresh copy needs an instance as its source, not a snapshot');
    return { handle, snapshot, snapshots: [], refresh };
  }
  const owned = instanceOnly ? [] : (await snapshots.list(handle)).map((s) => s.doc);
  return { handle, snapshots: owned, refresh };
}

/** Fill a create spec from the origin: config, devices and profiles unless the request gave them. */
export function applyCopyOrigin(spec: CreateSpec, origin: CopyOrigin, body: Record<string, unknown>): void {
  const base = origin.snapshot ?? origin.handle.record;
  if (base.architecture !== undefined) spec.architecture = base.architecture;
  // A request naming no type copies the source's: lxc sends none for a snapshot (a VM's snapshot included).
  if (!body.type) spec.type = origin.handle.record.type;
  if (origin.handle.record.type !== spec.type) throw badRequest(`Source instance "${origin.handle.name}" is a ${origin.handle.record.type}`);
  spec.config = { ...keepOnCopy(base.config), ...spec.config };
  if (!body.devices || Object.keys(body.devices as object).length === 0) spec.devices = structuredClone(base.devices);
  if (!body.profiles) spec.profiles = [...base.profiles];
  if (!body.description) spec.description = base.description;
  if (body.ephemeral === undefined) spec.ephemeral = base.ephemeral;
  const vol = { type: origin.handle.record.type, project: origin.handle.project, name: origin.handle.name };
  spec.source = {
    kind: 'copy',
    pool: origin.handle.record.pool,
    volume: vol,
    snapshot: origin.snapshot?.name,
    snapshots: origin.snapshots.map((s) => s.name),
  };
  spec.snapshots = origin.snapshots.map((s) => ({ ...s, config: keepOnSnapshotCopy(s.config), last_used_at: NEVER }));
  spec.origin = 'copy';
}

/**
 * Bring an existing, stopped copy up to date: its volume takes the source's content, source
 * snapshots it lacks are added (storage and records), its own snapshots stay.
 */
export async function refreshCopy(manager: InstanceManager, snapshots: SnapshotManager, origin: CopyOrigin, target: InstanceHandle, req?: ApiRequest): Promise<void> {
  if ((await target.driver.status(target.inst)) !== 'Stopped') throw badRequest('The target instance is running; stop it before a refresh copy');
  const have = new Set((await snapshots.list(target)).map((s) => s.doc.name));
  const added = origin.snapshots.filter((s) => !have.has(s.name));
  const vol = { type: target.record.type, project: target.project, name: target.name };
  const sourceVol = { type: origin.handle.record.type, project: origin.handle.project, name: origin.handle.name };
  await manager.deps.storage.refreshVolume(target.record.pool, vol, { pool: origin.handle.record.pool, volume: sourceVol, snapshots: added.map((s) => s.name) });
  for (const snap of added) {
    await snapshots.records.put(target.project, `${target.name}/${snap.name}`, { ...snap, config: keepOnSnapshotCopy(snap.config), last_used_at: NEVER }, 0).catch((err) => {
      if ((err as { status?: number }).status !== 409) throw err;
    });
  }
  manager.lifecycle('instance-updated', target, req, { refreshed_from: origin.handle.name });
}
