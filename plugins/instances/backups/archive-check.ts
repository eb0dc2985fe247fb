/**
 * Reads an uploaded backup once, in-process, before anything is extracted: the archive must be
 * whole (framing, checksums, the compressor's own check), and tar must not be able to write
 * outside the work area or through anything the archive itself planted. Refused, with a 400:
 * absolute names, `..`, members outside `backup/`, members below a symlink or a file of the
 * archive, a symlink redefined, hard links that leave their part of the archive or point at
 * something not archived before them, device nodes outside a root filesystem, and odd member
 * types. Device nodes in `rootfs/` are kept, as the reference keeps them: the caller is trusted
 * with privileged containers, which can make them anyway, and the device cgroup still applies.
 */
import { type HostTools, type InstanceType } from '../../../sdk/index.js';
import { type TarEntry } from '../../../sdk/lib/archive/index.js';
import {
  BackupMemberTracker, backupMemberParts as components, invalidBackup as invalid, walkBackupArchive,
  type BackupAlgorithm,
} from '../../../sdk/lib/backup/index.js';

export interface ArchiveScan {
  /** Content of `backup/index.yaml`. */
  index?: Buffer;
  /** Content of `backup/container/backup.yaml` (older archives keep the config only there). */
  containerYaml?: Buffer;
  /** Which layout the parts use: `container` (backup/container/...) or `virtual-machine` (backup/virtual-machine/...). */
  kind?: InstanceType;
  /** Parts with content: the instance's own, and the names of the snapshots. */
  hasContainer: boolean;
  snapshots: Set<string>;
  /** Disk images of a virtual machine's parts: `''` for the instance's own (backup/virtual-machine.img), else snapshot names. */
  disks: Set<string>;
  /** Optimized parts (the pool driver's streams): `backup/container.bin`, `backup/snapshots/<name>.bin`. */
  hasContainerStream: boolean;
  snapshotStreams: Set<string>;
  /** `backup/optimized_header.yaml` is there. */
  hasOptimizedHeader: boolean;
  members: number;
}

const REGULAR = new Set(['0', '7', 'S']);
/** The instance's own part and the snapshots' directory, by layout. */
const MAIN_DIRS: Record<string, InstanceType> = { container: 'container', 'virtual-machine': 'virtual-machine' };
const SNAPSHOT_DIRS: Record<string, InstanceType> = { snapshots: 'container', 'virtual-machine-snapshots': 'virtual-machine' };
const DEVICES = new Set(['3', '4', '6']);
const KNOWN = new Set([...REGULAR, '1', '2', '5', ...DEVICES]);

/** `container` or `snapshots/<name>` for members inside a part, undefined for the skeleton above them. */
function partOf(parts: string[]): string | undefined {
  if (MAIN_DIRS[parts[1]!]) return 'container';
  if (SNAPSHOT_DIRS[parts[1]!] && parts.length >= 3) return `snapshots/${parts[2]}`;
  return undefined;
}

/** Where a member sits: true when it is inside the root filesystem of a part. */
function inRootfs(parts: string[]): boolean {
  const base = MAIN_DIRS[parts[1]!] ? 2 : 3;
  return parts.length > base + 1 && parts[base] === 'rootfs';
}

/** A virtual machine's disk image beside its part: `''` for the instance's own, the snapshot's name, or undefined. */
function diskOf(parts: string[]): string | undefined {
  if (parts.length === 2 && parts[1] === 'virtual-machine.img') return '';
  if (parts.length === 3 && parts[1] === 'virtual-machine-snapshots' && parts[2]!.endsWith('.img')) return parts[2]!.slice(0, -'.img'.length);
  return undefined;
}

export class ArchiveRules {
  readonly scan: ArchiveScan = {
    hasContainer: false, snapshots: new Set(), disks: new Set(), hasContainerStream: false, snapshotStreams: new Set(), hasOptimizedHeader: false, members: 0,
  };
  private readonly tracker = new BackupMemberTracker();

  /** Returns true for the members whose content is wanted (the YAML files). */
  check(entry: TarEntry): boolean {
    const parts = components(entry.name, 'member');
    if (parts.length === 0) throw invalid(`member "${entry.name}" has no name`);
    const name = parts.join('/');
    if (parts[0] !== 'backup') throw invalid(`member "${entry.name}" is outside "backup/"`);
    if (!KNOWN.has(entry.type)) throw invalid(`member "${name}" has an unsupported type ("${entry.type}")`);
    this.tracker.checkPlace(parts);

    const isDir = entry.type === '5';
    let wanted = false;
    const disk = diskOf(parts);
    if (parts.length === 1 || (parts.length === 2 && SNAPSHOT_DIRS[parts[1]!])) {
      if (!isDir) throw invalid(`"${name}" must be a directory`);
      if (parts.length === 2) this.layout(SNAPSHOT_DIRS[parts[1]!]!);
    } else if (parts[1] !== 'container.bin' && parts[parts.length - 1]!.endsWith('.bin') && (parts[1]!.startsWith('virtual-machine') || (parts.length === 3 && parts[1] === 'virtual-machine-snapshots'))) {
      throw invalid(`"${name}" is an optimized part of a virtual machine: only plain virtual-machine backups can be imported (export without --optimized-storage)`);
    } else if (disk !== undefined) {
      if (!REGULAR.has(entry.type)) throw invalid(`"${name}" must be a regular file`);
      this.layout('virtual-machine');
      this.scan.disks.add(disk);
    } else if (parts.length === 2 && parts[1] === 'index.yaml') {
      if (!REGULAR.has(entry.type)) throw invalid('"backup/index.yaml" must be a regular file');
      wanted = true;
    } else if (parts.length === 2 && (parts[1] === 'optimized_header.yaml' || parts[1] === 'container.bin')) {
      if (!REGULAR.has(entry.type)) throw invalid(`"${name}" must be a regular file`);
      if (parts[1] === 'container.bin') this.scan.hasContainerStream = true;
      else this.scan.hasOptimizedHeader = true;
    } else if (parts.length === 3 && parts[1] === 'snapshots' && parts[2]!.endsWith('.bin') && REGULAR.has(entry.type)) {
      this.scan.snapshotStreams.add(parts[2]!.slice(0, -'.bin'.length));
    } else {
      const part = partOf(parts);
      if (!part) {
        throw invalid(`unexpected member "${name}" (a backup holds backup/index.yaml, backup/container/ and backup/snapshots/<name>/, or their optimized streams; a virtual machine's, backup/virtual-machine/ and its .img)`);
      }
      this.layout((MAIN_DIRS[parts[1]!] ?? SNAPSHOT_DIRS[parts[1]!])!);
      const depth = part === 'container' ? 2 : 3;
      if (parts.length === depth && !isDir) throw invalid(`"${name}" must be a directory`);
      if (parts.length === depth + 1 && parts[depth] === 'rootfs' && !isDir) throw invalid(`"${name}" must be a directory`);
      if (part === 'container') this.scan.hasContainer = true;
      else this.scan.snapshots.add(parts[2]!);
      if (DEVICES.has(entry.type) && !inRootfs(parts)) throw invalid(`device node or fifo "${name}" is outside a root filesystem`);
      if (entry.type === '1') this.tracker.checkHardLink(name, entry.linkname, part, partOf);
      wanted = part === 'container' && parts.length === 3 && parts[2] === 'backup.yaml' && REGULAR.has(entry.type);
    }
    this.tracker.record(parts, entry.type);
    this.scan.members++;
    return wanted;
  }

  /** Parts of one archive all use one layout: a container's or a virtual machine's. */
  private layout(kind: InstanceType): void {
    if (this.scan.kind && this.scan.kind !== kind) throw invalid('the archive mixes a container\'s parts (backup/container, backup/snapshots) with a virtual machine\'s (backup/virtual-machine, backup/virtual-machine-snapshots)');
    this.scan.kind = kind;
  }

  collect(entry: TarEntry, content: Buffer): void {
    const name = components(entry.name, 'member').join('/');
    if (name === 'backup/index.yaml') this.scan.index = content;
    else this.scan.containerYaml = content;
  }
}

/** Decompress and walk the whole archive; resolves with what it holds, throws a 400 naming the first problem. */
export async function scanArchive(hostTools: HostTools, file: string, algorithm: BackupAlgorithm): Promise<ArchiveScan> {
  const rules = new ArchiveRules();
  await walkBackupArchive(hostTools, file, algorithm, (entry) => rules.check(entry), (entry, content) => rules.collect(entry, content));
  return rules.scan;
}
