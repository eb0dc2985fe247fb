/**
 * The YAML documents a backup tarball carries, with the reference's fields and order:
 * `backup/index.yaml` (what the archive holds, and the whole config under `config`), and
 * `backup.yaml` in the instance directory and in each snapshot directory. The reference
 * recreates its records from these on import, so they are complete, not a summary.
 */
import { yaml } from '../../../sdk/lib/yaml/index.js';
import type { PoolInfo, Profile, StoredDoc, VolumeState } from '../../../sdk/index.js';
import type { InstanceHandle } from '../access.js';
import { expandConfig, expandDevices } from '../expand.js';
import type { InstanceManager } from '../manager.js';
import { instanceView } from '../render.js';
import { NO_EXPIRY, hasExpiry, type SnapshotRecord } from '../snapshots/record.js';

export interface BackupConfig {
  container: Record<string, unknown>;
  snapshots?: Record<string, unknown>[];
  pool: Record<string, unknown>;
  profiles: Record<string, unknown>[];
  volume: Record<string, unknown>;
  volume_snapshots?: Record<string, unknown>[];
}

const poolSection = (pool: PoolInfo) => ({
  config: pool.config, description: '', name: pool.name, driver: pool.driver, used_by: [], status: 'Created', locations: ['none'],
});

const profileSection = (p: Profile) => ({ config: p.config, description: p.description, devices: p.devices, name: p.name, used_by: [] });

const volumeSection = (handle: InstanceHandle, state: VolumeState) => ({
  config: state.config, description: state.description, name: handle.name, type: handle.record.type, used_by: [], location: 'none',
  content_type: 'filesystem', project: handle.project, created_at: NO_EXPIRY,
});

function snapshotSection(snap: SnapshotRecord, profiles: Profile[]) {
  return {
    expires_at: hasExpiry(snap.expires_at) ? snap.expires_at : NO_EXPIRY,
    architecture: snap.architecture,
    config: snap.config,
    created_at: snap.created_at,
    devices: snap.devices,
    ephemeral: snap.ephemeral,
    expanded_config: expandConfig(profiles, snap.config),
    expanded_devices: expandDevices(profiles, snap.devices),
    last_used_at: snap.last_used_at,
    name: snap.name,
    profiles: snap.profiles,
    stateful: snap.stateful,
    size: -1,
  };
}

/** The instance's config as it is now, with the snapshots the backup takes along (oldest first). */
export async function backupConfig(manager: InstanceManager, handle: InstanceHandle, snapshots: StoredDoc<SnapshotRecord>[]): Promise<BackupConfig> {
  const status = await handle.driver.status(handle.inst).catch(() => 'Error' as const);
  const pool = await manager.deps.storage.pool(handle.record.pool);
  const profiles = await manager.loadProfiles(handle.project, handle.record.profiles);
  const volume = await manager.deps.storage.volumeState(handle.record.pool, { type: handle.record.type, project: handle.project, name: handle.name });
  const config: BackupConfig = {
    container: instanceView(handle, status),
    pool: poolSection(pool),
    profiles: profiles.map(profileSection),
    volume: volumeSection(handle, volume),
  };
  if (snapshots.length) {
    const sections = [];
    for (const s of snapshots) sections.push(snapshotSection(s.doc, await manager.loadProfiles(handle.project, s.doc.profiles).catch(() => [])));
    config.snapshots = sections;
    config.volume_snapshots = snapshots.map((s) => ({
      description: volume.snapshots[s.doc.name]?.description ?? '', expires_at: hasExpiry(s.doc.expires_at) ? s.doc.expires_at : NO_EXPIRY, name: s.doc.name,
      config: volume.snapshots[s.doc.name]?.config ?? {}, content_type: 'filesystem', created_at: s.doc.created_at,
    }));
  }
  return config;
}

/** `backup.yaml` of a snapshot directory: the instance as it was when the snapshot was taken. */
export function snapshotBackupConfig(config: BackupConfig, snap: SnapshotRecord, index: number): BackupConfig {
  const section = config.snapshots![index]!;
  const container = {
    ...config.container,
    architecture: snap.architecture,
    config: snap.config,
    devices: snap.devices,
    ephemeral: snap.ephemeral,
    profiles: snap.profiles,
    description: snap.description,
    expanded_config: section.expanded_config,
    expanded_devices: section.expanded_devices,
    status: 'Stopped',
    status_code: 102,
  };
  return { container, pool: config.pool, profiles: config.profiles, volume: config.volume };
}

/** `optimized`: the parts are the pool driver's streams, `header`: with backup/optimized_header.yaml. */
export function indexDocument(name: string, pool: PoolInfo, type: string, config: BackupConfig, optimized?: { header: boolean }): Record<string, unknown> {
  const index: Record<string, unknown> = { name, backend: pool.driver, pool: pool.name };
  if (config.snapshots?.length) index.snapshots = config.snapshots.map((s) => s.name);
  Object.assign(index, { optimized: optimized !== undefined, optimized_header: optimized?.header === true, type, config });
  return index;
}

/** YAML as the reference's encoder writes it: block style, strings quoted only when they must be. */
export const toYaml = (doc: unknown) => yaml().stringify(doc, { lineWidth: 0, aliasDuplicateObjects: false, indentSeq: false });
