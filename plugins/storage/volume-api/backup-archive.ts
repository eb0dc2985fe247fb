/**
 * A custom volume backup as the reference writes it: `backup/index.yaml`, then
 * `backup/volume-snapshots/<name>/` for each snapshot (oldest first), then `backup/volume/`. The
 * index carries the volume's config and its snapshots' under `config`.
 *
 * An upload is walked once before anything is extracted: members must stay in those parts, no
 * absolute names or `..`, nothing below a symlink or file of the archive, hard links within their
 * part, no device nodes (a volume is data, never a root filesystem). Any problem is a 400.
 */
import { isPlainObject, stringMap, type HostTools } from '../../../sdk/index.js';
import { type TarEntry } from '../../../sdk/lib/archive/index.js';
import {
  BackupMemberTracker, backupMemberParts, invalidBackup as invalid, walkBackupArchive, type BackupAlgorithm,
} from '../../../sdk/lib/backup/index.js';
import { backupIndexText as text, checkBackupParts, checkListedSnapshot, parseBackupYaml, type BackupPartsFound } from '../../../sdk/lib/backup/index-yaml.js';
import { contentTypeOf } from './custom-volumes.js';
import { checkVolumeSnapshotName } from './names.js';
import type { ContentType } from './record.js';

export const VOLUME_PART = 'backup/volume';
export const SNAPSHOTS_PART = 'backup/volume-snapshots';
/** Where an optimized volume backup keeps the pool driver's streams, as the reference names them. */
export const VOLUME_OPTIMIZED_LAYOUT = { snapshot: (name: string) => `${SNAPSHOTS_PART}/${name}.bin`, volume: `${VOLUME_PART}.bin` };

const REGULAR = new Set(['0', '7', 'S']);
/** Regular files, hard links, symlinks, directories and fifos. */
const ALLOWED = new Set([...REGULAR, '1', '2', '5', '6']);

/** `volume` or `volume-snapshots/<name>` for members inside a part; undefined for the skeleton above them. */
function partOf(parts: string[]): string | undefined {
  if (parts[1] === 'volume') return 'volume';
  if (parts[1] === 'volume-snapshots' && parts.length >= 3) return `volume-snapshots/${parts[2]}`;
  return undefined;
}

export interface VolumeArchiveScan {
  index?: Buffer;
  hasVolume: boolean;
  snapshots: Set<string>;
  /** Optimized parts (the pool driver's streams): `backup/volume.bin`, `backup/volume-snapshots/<name>.bin`. */
  hasVolumeStream: boolean;
  snapshotStreams: Set<string>;
  hasOptimizedHeader: boolean;
}

class VolumeArchiveRules {
  readonly scan: VolumeArchiveScan = { hasVolume: false, snapshots: new Set(), hasVolumeStream: false, snapshotStreams: new Set(), hasOptimizedHeader: false };
  private readonly tracker = new BackupMemberTracker();

  check(entry: TarEntry): boolean {
    const parts = backupMemberParts(entry.name);
    if (parts.length === 0) throw invalid(`member "${entry.name}" has no name`);
    const name = parts.join('/');
    if (parts[0] !== 'backup') throw invalid(`member "${entry.name}" is outside "backup/"`);
    if (entry.type === '3' || entry.type === '4') throw invalid(`device node "${name}" has no place in a volume backup`);
    if (!ALLOWED.has(entry.type)) throw invalid(`member "${name}" has an unsupported type ("${entry.type}")`);
    this.tracker.checkPlace(parts);
    const isDir = entry.type === '5';
    let wanted = false;
    if (parts.length === 1 || (parts.length === 2 && parts[1] === 'volume-snapshots')) {
      if (!isDir) throw invalid(`"${name}" must be a directory`);
    } else if (parts.length === 2 && parts[1] === 'index.yaml') {
      if (!REGULAR.has(entry.type)) throw invalid('"backup/index.yaml" must be a regular file');
      wanted = true;
    } else if (parts.length === 2 && (parts[1] === 'optimized_header.yaml' || parts[1] === 'volume.bin')) {
      if (!REGULAR.has(entry.type)) throw invalid(`"${name}" must be a regular file`);
      if (parts[1] === 'volume.bin') this.scan.hasVolumeStream = true;
      else this.scan.hasOptimizedHeader = true;
    } else if (parts.length === 3 && parts[1] === 'volume-snapshots' && parts[2]!.endsWith('.bin') && REGULAR.has(entry.type)) {
      this.scan.snapshotStreams.add(parts[2]!.slice(0, -'.bin'.length));
    } else {
      const part = partOf(parts);
      if (!part) {
        throw invalid(`unexpected member "${name}" (a volume backup holds backup/index.yaml, backup/volume/ and backup/volume-snapshots/<name>/, or their optimized streams)`);
      }
      const depth = part === 'volume' ? 2 : 3;
      if (parts.length === depth && !isDir) throw invalid(`"${name}" must be a directory`);
      if (part === 'volume') this.scan.hasVolume = true;
      else this.scan.snapshots.add(parts[2]!);
      if (entry.type === '1') this.tracker.checkHardLink(name, entry.linkname, part, partOf);
    }
    this.tracker.record(parts, entry.type);
    return wanted;
  }

  collect(_entry: TarEntry, content: Buffer): void {
    this.scan.index = content;
  }
}

export async function scanVolumeArchive(hostTools: HostTools, file: string, algorithm: BackupAlgorithm): Promise<VolumeArchiveScan> {
  const rules = new VolumeArchiveRules();
  await walkBackupArchive(hostTools, file, algorithm, (e) => rules.check(e), (e, c) => rules.collect(e, c));
  return rules.scan;
}

export interface VolumeBackupIndex {
  name: string;
  pool: string;
  /** The parts are streams of the `backend` storage driver. */
  optimized: boolean;
  backend: string;
  description: string;
  config: Record<string, string>;
  contentType: ContentType;
  /** Oldest first, as archived. */
  snapshots: { name: string; description: string; expiresAt: string; createdAt?: string }[];
}

/** A time kept only when it is a real one (the reference writes the zero time for "never" and "unknown"). */
const time = (value: unknown, what: string): string | undefined => {
  const t = text(value, what);
  return t && !t.startsWith('0001-') && !Number.isNaN(Date.parse(t)) ? t : undefined;
};

export function readVolumeIndex(scan: VolumeArchiveScan): VolumeBackupIndex {
  if (!scan.index) throw invalid('backup/index.yaml is missing');
  const doc = parseBackupYaml(scan.index, 'backup/index.yaml');
  if (!isPlainObject(doc)) throw invalid('backup/index.yaml is not a map');
  const type = text(doc.type, 'type');
  if (type !== 'custom') throw invalid(`it is a backup of a${type === 'container' || !type ? 'n instance' : ` "${type}"`}, not of a custom volume`);
  const optimized = doc.optimized === true;
  const backend = text(doc.backend, 'backend') ?? '';
  if (optimized && !backend) throw invalid('an optimized backup must name its storage driver ("backend")');
  const name = text(doc.name, 'name');
  if (!name) throw invalid('backup/index.yaml has no volume "name"');
  const names = doc.snapshots ?? [];
  if (!Array.isArray(names) || names.some((s) => typeof s !== 'string')) throw invalid('"snapshots" must be a list of names');
  for (const s of names as string[]) {
    try {
      checkVolumeSnapshotName(s);
    } catch (err) {
      throw invalid(`snapshot name "${s}": ${(err as Error).message}`);
    }
  }
  if (new Set(names).size !== names.length) throw invalid('"snapshots" lists a snapshot twice');
  const config = isPlainObject(doc.config) ? doc.config : {};
  const volume = isPlainObject(config.volume) ? config.volume : {};
  const wrap = <T>(fn: () => T, what: string): T => {
    try {
      return fn();
    } catch (err) {
      throw invalid(`${what}: ${(err as Error).message}`);
    }
  };
  const contentType = wrap(() => contentTypeOf(volume.content_type), 'config.volume.content_type');
  const sections = Array.isArray(config.volume_snapshots) ? config.volume_snapshots : [];
  const byName = new Map<string, Record<string, unknown>>();
  for (const s of sections) if (isPlainObject(s) && typeof s.name === 'string') byName.set(s.name, s);

  const found: BackupPartsFound = {
    main: VOLUME_PART, snapshotsDir: SNAPSHOTS_PART, hasMain: scan.hasVolume, snapshots: scan.snapshots,
    hasMainStream: scan.hasVolumeStream, snapshotStreams: scan.snapshotStreams, hasOptimizedHeader: scan.hasOptimizedHeader,
  };
  checkBackupParts(found, optimized, names as string[]);
  return {
    name,
    pool: text(doc.pool, 'pool') ?? '',
    optimized,
    backend,
    description: text(volume.description, 'config.volume.description') ?? '',
    config: wrap(() => stringMap(volume.config, 'config'), 'config.volume'),
    contentType,
    snapshots: (names as string[]).map((s) => {
      checkListedSnapshot(found, optimized, s);
      const section = byName.get(s) ?? {};
      return {
        name: s,
        description: text(section.description, `config.volume_snapshots[${s}].description`) ?? '',
        expiresAt: time(section.expires_at, `config.volume_snapshots[${s}].expires_at`) ?? '',
        createdAt: time(section.created_at, `config.volume_snapshots[${s}].created_at`),
      };
    }),
  };
}
