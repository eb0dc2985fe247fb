/**
 * `backup/index.yaml` of an uploaded backup: what it holds (name, pool, snapshots, format) and the
 * instance and snapshot configs under `config` (or, for archives older than that field, in
 * `backup/container/backup.yaml`), and whether the parts are laid out for its instance type
 * (layout.ts). Anything missing or malformed is a 400.
 */
import { isPlainObject, stringMap, type DeviceConfig, type InstanceType, type VolumeState } from '../../../sdk/index.js';
import { invalidBackup as invalid } from '../../../sdk/lib/backup/index.js';
import { backupIndexText as text, checkBackupParts, checkListedSnapshot, parseBackupYaml as parseYaml, type BackupPartsFound } from '../../../sdk/lib/backup/index-yaml.js';
import { deviceMap, profileList } from '../shape.js';
import { snapshotNameProblem } from '../../../sdk/lib/snapshots/pattern.js';
import type { ArchiveScan } from './archive-check.js';
import { backupLayout } from './layout.js';

export interface InstanceSection {
  architecture: string;
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
  profiles: string[];
  ephemeral: boolean;
  stateful: boolean;
  description: string;
  created_at?: string;
  last_used_at?: string;
  expires_at?: string;
  name: string;
}

export interface BackupIndex {
  name: string;
  pool: string;
  backend: string;
  type: InstanceType;
  /** The parts are streams of the `backend` storage driver (backup/container.bin, backup/snapshots/<name>.bin). */
  optimized: boolean;
  container: InstanceSection;
  /** In archive order (oldest first), each with its config. */
  snapshots: InstanceSection[];
  /** The instance volume's description and config (`volume`, `volume_snapshots`); undefined when the archive has none. */
  volume?: VolumeState;
}

/** `config.volume` and `config.volume_snapshots`: what the volume and its snapshots carried. */
function volumeSection(config: Record<string, unknown>): VolumeState | undefined {
  const vol = config.volume;
  if (!isPlainObject(vol)) return undefined;
  const wrap = <T>(what: string, fn: () => T): T => {
    try {
      return fn();
    } catch (err) {
      throw invalid(`${what}: ${(err as Error).message}`);
    }
  };
  const state: VolumeState = {
    description: text(vol.description, 'config.volume.description') ?? '',
    config: wrap('config.volume', () => stringMap(vol.config, 'config')),
    snapshots: {},
  };
  const snaps = Array.isArray(config.volume_snapshots) ? config.volume_snapshots : [];
  for (const s of snaps) {
    if (!isPlainObject(s) || typeof s.name !== 'string') continue;
    state.snapshots[s.name] = {
      description: text(s.description, `config.volume_snapshots[${s.name}].description`) ?? '',
      config: wrap(`config.volume_snapshots[${s.name}]`, () => stringMap(s.config, 'config')),
    };
  }
  return state;
}

/** A time field: kept as written when it parses, dropped otherwise. */
const time = (value: unknown, what: string): string | undefined => {
  const t = text(value, what);
  return t && !Number.isNaN(Date.parse(t)) ? t : undefined;
};

function section(value: unknown, what: string): InstanceSection {
  if (!isPlainObject(value)) throw invalid(`${what} is missing or not a map`);
  const wrap = <T>(fn: () => T): T => {
    try {
      return fn();
    } catch (err) {
      throw invalid(`${what}: ${(err as Error).message}`);
    }
  };
  return {
    architecture: text(value.architecture, `${what}.architecture`) || 'x86_64',
    config: wrap(() => stringMap(value.config, 'config')),
    devices: wrap(() => deviceMap(value.devices)),
    // An instance without the field had the default profile; an empty list stays empty.
    profiles: wrap(() => profileList(value.profiles)) ?? ['default'],
    ephemeral: value.ephemeral === true,
    stateful: value.stateful === true,
    description: text(value.description, `${what}.description`) ?? '',
    created_at: time(value.created_at, `${what}.created_at`),
    last_used_at: time(value.last_used_at, `${what}.last_used_at`),
    expires_at: time(value.expires_at, `${what}.expires_at`),
    name: text(value.name, `${what}.name`) ?? '',
  };
}

export function readIndex(scan: ArchiveScan): BackupIndex {
  if (!scan.index) throw invalid('backup/index.yaml is missing');
  const doc = parseYaml(scan.index, 'backup/index.yaml');
  if (!isPlainObject(doc)) throw invalid('backup/index.yaml is not a map');
  const name = text(doc.name, 'name');
  if (!name) throw invalid('backup/index.yaml has no instance "name"');
  const type = (text(doc.type, 'type') || 'container') as InstanceType;
  if (type !== 'container' && type !== 'virtual-machine') throw invalid(`unknown instance type "${type}"`);
  const optimized = doc.optimized === true;
  if (optimized && !text(doc.backend, 'backend')) throw invalid('an optimized backup must name its storage driver ("backend")');
  const snapshotNames = doc.snapshots ?? [];
  if (!Array.isArray(snapshotNames) || snapshotNames.some((s) => typeof s !== 'string')) throw invalid('"snapshots" must be a list of names');
  for (const s of snapshotNames as string[]) {
    const problem = snapshotNameProblem(s);
    if (problem) throw invalid(`snapshot name "${s}" ${problem}`);
  }
  if (new Set(snapshotNames).size !== snapshotNames.length) throw invalid('"snapshots" lists a snapshot twice');

  // Config: index.yaml's own since LXD 4.x; before, only the instance directory's backup.yaml had it.
  let config = doc.config;
  if (config === undefined || config === null) {
    if (!scan.containerYaml) throw invalid('backup/index.yaml has no "config" and there is no backup/container/backup.yaml');
    config = parseYaml(scan.containerYaml, 'backup/container/backup.yaml');
  }
  if (!isPlainObject(config)) throw invalid('the backup config is not a map');
  const container = section(config.container, 'config.container');
  const snapshotConfigs = config.snapshots ?? [];
  if (!Array.isArray(snapshotConfigs)) throw invalid('config.snapshots must be a list');
  const byName = new Map<string, unknown>();
  for (const s of snapshotConfigs) if (isPlainObject(s) && typeof s.name === 'string') byName.set(s.name, s);

  const layout = backupLayout(type);
  if (scan.kind && scan.kind !== type) throw invalid(`backup/index.yaml says the instance is a ${type} but the archive holds the parts of a ${scan.kind}`);
  const found: BackupPartsFound = {
    main: layout.main, snapshotsDir: layout.snapshots, hasMain: scan.hasContainer, snapshots: scan.snapshots,
    hasMainStream: scan.hasContainerStream, snapshotStreams: scan.snapshotStreams, hasOptimizedHeader: scan.hasOptimizedHeader,
  };
  checkBackupParts(found, optimized, snapshotNames as string[]);
  const checkDisk = (disk: string, member: string) => {
    if (layout.disk && !optimized && !scan.disks.has(disk)) throw invalid(`the archive has no ${member}.img (the virtual machine's disk)`);
  };
  checkDisk('', layout.main);
  const snapshots = (snapshotNames as string[]).map((s) => {
    checkListedSnapshot(found, optimized, s);
    checkDisk(s, `${layout.snapshots}/${s}`);
    // A snapshot without its own config takes the instance's, as it was when archived.
    const snap = byName.has(s) ? section(byName.get(s), `config.snapshots[${s}]`) : { ...container };
    return { ...snap, name: s };
  });
  return {
    name,
    pool: text(doc.pool, 'pool') ?? '',
    backend: text(doc.backend, 'backend') ?? '',
    type,
    optimized,
    container,
    snapshots,
    volume: volumeSection(config),
  };
}
