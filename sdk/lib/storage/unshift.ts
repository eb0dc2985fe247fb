/**
 * Trees from a daemon that shifts ids on disk (the reference, on hosts without idmapped mounts)
 * arrive owned by host ids: an instance's root filesystem (`volatile.last_state.idmap` says by which
 * map) or a custom volume once attached (`volatile.idmap.last`). This daemon keeps files at the
 * container's own ids and maps at mount time, so such a tree is shifted back once, when it comes in
 * (a backup import, a migration). setuid/setgid bits, which chown clears, are put back. (File
 * capabilities and ACL entries naming ids are not remapped.)
 */
import { lchown, lstat, chmod, opendir } from 'node:fs/promises';
import path from 'node:path';
import { badRequest } from '../../errors.js';
import type { IdmapEntry } from '../../instance.js';

/**
 * The map a tree is shifted by; empty when it is not shifted. `source` names where the value came
 * from in errors (the key, in a backup by default).
 */
export function parseShift(value: string | undefined, source = 'Invalid backup: "volatile.last_state.idmap"'): IdmapEntry[] {
  if (!value || value === '[]') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw badRequest(`${source} is not valid JSON`);
  }
  if (!Array.isArray(parsed)) throw badRequest(`${source} must be a list`);
  return parsed.map((e) => {
    const ok = e && typeof e === 'object' && ['Hostid', 'Nsid', 'Maprange'].every((k) => Number.isSafeInteger(e[k]) && e[k] >= 0);
    if (!ok) throw badRequest(`${source} has a malformed entry`);
    return { Isuid: e.Isuid === true, Isgid: e.Isgid === true, Hostid: e.Hostid, Nsid: e.Nsid, Maprange: e.Maprange };
  });
}

function back(map: IdmapEntry[], id: number, kind: 'Isuid' | 'Isgid'): number {
  const entry = map.find((e) => e[kind] && id >= e.Hostid && id < e.Hostid + e.Maprange);
  return entry ? entry.Nsid + (id - entry.Hostid) : id;
}

/** Shift every entry below `root` back to container ids; resolves with the number changed. */
export async function unshiftTree(root: string, map: IdmapEntry[]): Promise<number> {
  if (map.length === 0) return 0;
  let changed = 0;
  // A hard-linked file is reached by each of its names; shift it once (shifted ids can fall in the host range again).
  const done = new Set<string>();
  const pending = [root];
  while (pending.length) {
    const dir = pending.pop()!;
    await fix(dir);
    for await (const entry of await opendir(dir)) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) pending.push(full);
      else await fix(full);
    }
  }
  return changed;

  async function fix(file: string): Promise<void> {
    const st = await lstat(file);
    if (!st.isDirectory() && st.nlink > 1) {
      const key = `${st.dev}:${st.ino}`;
      if (done.has(key)) return;
      done.add(key);
    }
    const uid = back(map, st.uid, 'Isuid');
    const gid = back(map, st.gid, 'Isgid');
    if (uid === st.uid && gid === st.gid) return;
    await lchown(file, uid, gid);
    if (!st.isSymbolicLink() && st.mode & 0o6000) await chmod(file, st.mode & 0o7777);
    changed++;
  }
}
