/** An id inside an instance as the host sees it, read from its init's uid_map/gid_map. */
import { readFileSync } from 'node:fs';

export function mapToHost(pid: number, kind: 'uid' | 'gid', id: number): number {
  let text = '';
  try {
    text = readFileSync(`/proc/${pid}/${kind}_map`, 'utf8');
  } catch {
    return id;
  }
  for (const line of text.trim().split('\n')) {
    const [inside, outside, count] = line.trim().split(/\s+/).map(Number);
    if (inside === undefined || outside === undefined || count === undefined) continue;
    if (id >= inside && id < inside + count) return outside + (id - inside);
  }
  throw new Error(`${kind} ${id} has no host id in the instance's id map`);
}
