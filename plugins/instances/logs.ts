/**
 * An instance's log directory: lxc.log (qemu.log for a VM), console.log and recorded exec output. Only names the
 * reference serves are reachable, so a request can never name a path outside the directory.
 */
import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { badRequest } from '../../sdk/index.js';

/** Log files untouched for this long are removed (the reference keeps two days). */
export const LOG_EXPIRY_MS = 48 * 3600_000;

const SERVED = /^(lxc\.log|lxc\.conf|qemu\.log|console\.log|(exec|migration|snapshot)_[A-Za-z0-9._-]+)$/;
/** Files the driver keeps writing or needs: cleared through other means, never deleted here. */
const UNDELETABLE = new Set(['lxc.log', 'lxc.conf', 'qemu.log']);

export function checkLogName(name: string): string {
  if (!SERVED.test(name) || name.includes('..')) throw badRequest(`Invalid log file name "${name}"`);
  return name;
}

export function logFile(logDir: string, name: string): string {
  return path.join(logDir, checkLogName(name));
}

export function checkDeletable(name: string): void {
  checkLogName(name);
  if (UNDELETABLE.has(name)) throw badRequest(`The log file "${name}" cannot be deleted`);
}

/** Where `record-output` puts a command's output. */
export function execRecordNames(operationId: string): { stdout: string; stderr: string } {
  return { stdout: `exec_${operationId}.stdout`, stderr: `exec_${operationId}.stderr` };
}

/** Names of the served log files present in the directory, sorted. */
export async function listLogs(logDir: string): Promise<string[]> {
  const entries = await readdir(logDir, { withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile() && SERVED.test(e.name)).map((e) => e.name).sort();
}

/** Remove log files older than `maxAgeMs` in each instance directory under `root`; the config is kept. */
export async function expireLogs(root: string, maxAgeMs = LOG_EXPIRY_MS, now = Date.now()): Promise<number> {
  let removed = 0;
  for (const dir of await readdir(root, { withFileTypes: true }).catch(() => [])) {
    if (!dir.isDirectory()) continue;
    const instanceDir = path.join(root, dir.name);
    for (const name of await listLogs(instanceDir)) {
      if (name === 'lxc.conf') continue;
      const file = path.join(instanceDir, name);
      const st = await stat(file).catch(() => undefined);
      if (st && now - st.mtimeMs > maxAgeMs) {
        await rm(file, { force: true });
        removed++;
      }
    }
  }
  return removed;
}
