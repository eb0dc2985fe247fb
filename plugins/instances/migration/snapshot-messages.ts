/**
 * Snapshot records in and out of the migration header: what a snapshot carries besides its files
 * (config, devices, profiles, dates). The header has no description; times travel as Unix seconds.
 */
import type { DeviceConfig } from '../../../sdk/index.js';
import type { SnapshotMessage } from '../../../sdk/lib/migration/index.js';
import { NEVER } from '../record.js';
import { NO_EXPIRY, type SnapshotRecord } from '../snapshots/record.js';
import { architectureId, architectureName } from './architectures.js';

const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000);
const toIso = (secs: number | undefined, none: string) => (!secs || secs <= 0 ? none : new Date(secs * 1000).toISOString().replace('.000Z', 'Z'));
const pairs = (map: Record<string, string>) => Object.entries(map).map(([key, value]) => ({ key, value }));
const unpair = (list: { key: string; value: string }[] | undefined): Record<string, string> => Object.fromEntries((list ?? []).map((p) => [p.key, p.value]));
export const unpairConfig = unpair;

export function snapshotMessage(snap: SnapshotRecord): SnapshotMessage {
  return {
    name: snap.name,
    localConfig: pairs(snap.config),
    profiles: snap.profiles,
    ephemeral: snap.ephemeral,
    localDevices: Object.entries(snap.devices).map(([name, config]) => ({ name, config: pairs(config as Record<string, string>) })),
    architecture: architectureId(snap.architecture),
    stateful: snap.stateful,
    creation_date: seconds(snap.created_at),
    last_used_date: snap.last_used_at && snap.last_used_at !== NEVER ? seconds(snap.last_used_at) : 0,
    expiry_date: snap.expires_at && !snap.expires_at.startsWith('0001-') ? seconds(snap.expires_at) : 0,
  };
}

/** A record from a peer's message; the name was checked with the header. */
export function snapshotRecord(msg: SnapshotMessage, fallbackArchitecture: string): SnapshotRecord {
  const devices: Record<string, DeviceConfig> = {};
  for (const dev of msg.localDevices ?? []) devices[dev.name] = unpair(dev.config) as DeviceConfig;
  return {
    name: msg.name,
    architecture: msg.architecture ? architectureName(msg.architecture) : fallbackArchitecture,
    config: unpair(msg.localConfig),
    devices,
    ephemeral: !!msg.ephemeral,
    profiles: msg.profiles ?? [],
    stateful: false,
    description: '',
    created_at: toIso(msg.creation_date, new Date().toISOString()),
    expires_at: toIso(msg.expiry_date, NO_EXPIRY),
    last_used_at: toIso(msg.last_used_date, NEVER),
  };
}

/** A received snapshot keeps its config but not the source's volatile keys, as a local copy does. */
export const keepOnReceive = (config: Record<string, string>) =>
  Object.fromEntries(Object.entries(config).filter(([k]) => !k.startsWith('volatile.') || k === 'volatile.base_image' || k === 'volatile.apply_template'));
