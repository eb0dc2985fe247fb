/**
 * What an instance owns that `recursion=2` shows (snapshots, backups). Each kind answers for one
 * instance, or for a whole listing at once so that 500 instances cost one store read, not 500.
 */
import type { StoredDoc } from '../../sdk/index.js';
import type { InstanceHandle } from './access.js';

export interface ChildLister {
  of(handle: InstanceHandle): Promise<unknown[]>;
  /** Views keyed `<project>/<instance>`; every project when `project` is undefined. */
  all(project: string | undefined): Promise<Map<string, unknown[]>>;
}

export interface ChildKinds {
  snapshots?: ChildLister;
  backups?: ChildLister;
}

/** Records keyed `<instance>/<child>` grouped by owning instance, each group in `order`, rendered by `view`. */
export async function groupByInstance<T>(
  stored: StoredDoc<T>[],
  order: (a: StoredDoc<T>, b: StoredDoc<T>) => number,
  view: (s: StoredDoc<T>) => unknown | Promise<unknown>,
): Promise<Map<string, unknown[]>> {
  const groups = new Map<string, StoredDoc<T>[]>();
  for (const s of stored) {
    const key = `${s.project}/${s.name.slice(0, s.name.indexOf('/'))}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push(s);
  }
  const out = new Map<string, unknown[]>();
  for (const [key, group] of groups) out.set(key, await Promise.all(group.sort(order).map(view)));
  return out;
}
