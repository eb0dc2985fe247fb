/**
 * A peer that shifts ids on disk (the reference, once an instance has started) sends trees owned by
 * host ids, and says by which map: the header's `idmap` for the instance, each snapshot's own
 * `volatile.last_state.idmap` for that snapshot (one taken before the first start is not shifted).
 * This daemon keeps container ids on disk, so received trees are shifted back.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { IdmapEntry } from '../../../sdk/index.js';
import type { MigrationHeader } from '../../../sdk/lib/migration/index.js';
import { parseShift, unshiftTree } from '../../../sdk/lib/storage/index.js';

export function headerShift(header: MigrationHeader): IdmapEntry[] {
  return (header.idmap ?? []).map((e) => {
    if (![e.hostid, e.nsid, e.maprange].every((n) => Number.isSafeInteger(n) && n >= 0)) throw new Error('The migration header carries a malformed id map');
    return { Isuid: !!e.isuid, Isgid: !!e.isgid, Hostid: e.hostid, Nsid: e.nsid, Maprange: e.maprange };
  });
}

/** The map of a snapshot: its own recorded one when it has it, the instance's otherwise. */
export function snapshotShift(config: Record<string, string>, instanceMap: IdmapEntry[]): IdmapEntry[] {
  const own = config['volatile.last_state.idmap'];
  return own === undefined ? instanceMap : parseShift(own);
}

export async function unshiftReceived(volumeDir: string, map: IdmapEntry[]): Promise<void> {
  const rootfs = path.join(volumeDir, 'rootfs');
  if (map.length && existsSync(rootfs)) await unshiftTree(rootfs, map);
}
