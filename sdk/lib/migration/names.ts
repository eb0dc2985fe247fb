/** What a peer's header may name: checked before anything is written, since names become paths. */
import type { MigrationHeader } from './messages.js';

/** More snapshots than any instance here could hold is a peer to refuse, not a list to walk. */
export const MAX_SNAPSHOTS = 10000;

export function checkSnapshotName(name: unknown): string {
  if (typeof name !== 'string' || name === '' || name.length > 255) throw new Error('The migration header names a snapshot with an empty or overlong name');
  if (name.includes('/') || name === '.' || name === '..' || name.includes('\0')) throw new Error(`The migration header names an invalid snapshot "${name}"`);
  return name;
}

/** The snapshot names a header announces, oldest first, checked; the full records must match them when present. */
export function headerSnapshotNames(header: MigrationHeader): string[] {
  const names = header.snapshotNames ?? [];
  const records = header.snapshots ?? [];
  if (names.length > MAX_SNAPSHOTS || records.length > MAX_SNAPSHOTS) throw new Error(`The migration header lists more than ${MAX_SNAPSHOTS} snapshots`);
  const listed = (names.length ? names : records.map((s) => s.name)).map(checkSnapshotName);
  if (records.length && (records.length !== listed.length || records.some((s, i) => s.name !== listed[i]))) {
    throw new Error('The migration header\'s snapshot names and snapshot records disagree');
  }
  if (new Set(listed).size !== listed.length) throw new Error('The migration header names a snapshot twice');
  return listed;
}
