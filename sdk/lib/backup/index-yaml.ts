/**
 * Reading `backup/index.yaml` of an uploaded backup, alike for instances and custom volumes: its
 * YAML, its string fields, and whether the archive's parts match what it says (directories for a
 * plain backup, the pool driver's `.bin` streams for an optimized one). Any problem is a 400.
 */
import { yaml } from '../yaml/index.js';
import { invalidBackup as invalid } from './import.js';

export function parseBackupYaml(content: Buffer, file: string): unknown {
  try {
    return yaml().parse(content.toString('utf8'));
  } catch (err) {
    throw invalid(`${file} is not valid YAML (${(err as Error).message.split('\n')[0]})`);
  }
}

/** A string field; absent gives undefined. */
export function backupIndexText(value: unknown, what: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  // The reference's encoder writes times unquoted; a YAML 1.1 reader could give a Date back.
  if (value instanceof Date) return value.toISOString();
  throw invalid(`${what} must be a string`);
}

/** What the walk of an archive found, in the family's own member names (`main`: `backup/container` or `backup/volume`). */
export interface BackupPartsFound {
  main: string;
  snapshotsDir: string;
  hasMain: boolean;
  snapshots: ReadonlySet<string>;
  hasMainStream: boolean;
  snapshotStreams: ReadonlySet<string>;
  hasOptimizedHeader: boolean;
}

/** The archive holds the parts its index's `optimized` says, and no snapshot stream the index leaves out. */
export function checkBackupParts(found: BackupPartsFound, optimized: boolean, listed: readonly string[]): void {
  if (optimized) {
    if (found.hasMain || found.snapshots.size) throw invalid('an optimized backup holds streams (.bin), not directories');
    if (!found.hasMainStream) throw invalid(`the optimized archive has no ${found.main}.bin`);
    const extra = [...found.snapshotStreams].find((s) => !listed.includes(s));
    if (extra !== undefined) throw invalid(`the archive has ${found.snapshotsDir}/${extra}.bin, which backup/index.yaml does not list`);
  } else {
    if (found.hasMainStream || found.snapshotStreams.size || found.hasOptimizedHeader) throw invalid('the archive has optimized streams (.bin) but backup/index.yaml does not say it is optimized');
    if (!found.hasMain) throw invalid(`the archive has no ${found.main}/`);
  }
}

/** A snapshot the index lists has its part in the archive. */
export function checkListedSnapshot(found: BackupPartsFound, optimized: boolean, snapshot: string): void {
  if (optimized ? !found.snapshotStreams.has(snapshot) : !found.snapshots.has(snapshot)) {
    throw invalid(`backup/index.yaml lists snapshot "${snapshot}" but the archive has no ${found.snapshotsDir}/${snapshot}${optimized ? '.bin' : '/'}`);
  }
}
