/**
 * The build dir of an image, removed however the build ends. debootstrap mounts /proc, /sys and
 * more inside the tree while it installs, and an interrupted run can leave them: those are
 * unmounted first, deepest first, so the removal never walks into a live file system.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';

/** Mount points at or under `dir`, deepest first (octal escapes of /proc/self/mounts decoded). */
export function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mounts', 'utf8').split('\n')
    .map((line) => line.split(' ')[1]?.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((target): target is string => target !== undefined && (target === dir || target.startsWith(`${dir}/`)))
    .sort((a, b) => b.length - a.length);
}

/** Unmounts what is left under `dir`, then removes it; false when a mount would not go (the dir is kept). */
export function removeWorkDir(dir: string): boolean {
  for (const target of mountsUnder(dir)) spawnSync('umount', ['-l', target], { stdio: 'ignore' });
  if (mountsUnder(dir).length > 0) return false;
  rmSync(dir, { recursive: true, force: true });
  return true;
}
