/**
 * The instance directory (the volume holding `rootfs/`) is mode 0100 and owned by the host id of
 * the container's root, as the reference keeps it (its fix for CVE-2016-1582): the rootfs holds
 * setuid-root binaries, here on disk even for unprivileged containers (the rootfs is mounted
 * idmapped, never chowned), and no other host user may reach them. Only the container's root may
 * pass through, which it needs to set up its mounts; the host's root passes anyway.
 */
import { statSync, type Stats } from 'node:fs';
import { chmod, chown } from 'node:fs/promises';
import type { IdmapEntry, IdmapPlan } from './idmap.js';

export const INSTANCE_DIR_MODE = 0o100;

/** Host ids of container uid 0 and gid 0 under a map (0 for a privileged container or when unmapped). */
export function rootOwner(plan: IdmapPlan): { uid: number; gid: number } {
  if (plan.privileged) return { uid: 0, gid: 0 };
  const hostOf = (entries: IdmapEntry[]) => {
    const e = entries.find((m) => m.Nsid <= 0 && 0 < m.Nsid + m.Maprange);
    return e ? e.Hostid - e.Nsid : 0;
  };
  return { uid: hostOf(plan.map.filter((e) => e.Isuid)), gid: hostOf(plan.map.filter((e) => e.Isgid)) };
}

/**
 * A directory's owner and mode read in place, undefined when it cannot be read. Boots check every
 * container's directories: 10,000 stats through the promise API took ~4× as long as synchronous ones
 * (decision 0076). Changes, which are rare, stay off the loop.
 */
export function statInPlace(dir: string): Stats | undefined {
  try {
    return statSync(dir);
  } catch {
    return undefined;
  }
}

/** Give the directory the owner and mode; false when it does not exist (a volume still being made). */
export async function lockInstanceDir(dir: string, owner: { uid: number; gid: number }): Promise<boolean> {
  const st = statInPlace(dir);
  if (!st?.isDirectory()) return false;
  // The reference keeps the directory's group as root's.
  if (st.uid !== owner.uid || st.gid !== 0) await chown(dir, owner.uid, 0);
  if ((st.mode & 0o7777) !== INSTANCE_DIR_MODE) await chmod(dir, INSTANCE_DIR_MODE);
  return true;
}
