/**
 * Every instance record, parsed once and kept in memory for the read-only paths that walk them all
 * (listings, used_by, project state, metrics, the project policy gate). Without it each such request
 * re-read and re-parsed every row: at 10,000 instances that alone cost ~200 ms.
 *
 * Never stale: the store publishes each change before the write that made it resolves, and a change
 * only marks its key; the next read re-reads the marked keys (one cached `get` each) before it
 * answers. A read that overlaps a change of the same key reads it again. In a cluster another member's
 * write reaches this one through a watch, later than its acknowledgement: there the index stands aside
 * and every read goes to the store, and any change of the cluster view drops it (a member leaving its
 * cluster goes back to another database).
 *
 * The documents are shared between readers: callers must not change them (copy before editing).
 */
import type { Collection, PluginContext, StoredDoc } from '../../sdk/index.js';
import type { InstanceRecord } from './record.js';

/** Changed keys past which the whole collection is read again at once. */
const REREAD_ALL_AFTER = 256;

const keyOf = (project: string, name: string) => `${project}\0${name}`;

export class RecordIndex {
  private docs = new Map<string, StoredDoc<InstanceRecord>>();
  /** `docs` in the store's order (project, name), rebuilt after a change. */
  private sorted?: StoredDoc<InstanceRecord>[];
  /** `sorted` split by project, made when a project is first asked for after a change. */
  private byProject = new Map<string, StoredDoc<InstanceRecord>[]>();
  private filled = false;
  /** Keys changed since they were last read. */
  private readonly marked = new Map<string, { project: string; name: string }>();
  /** Bumped by every reset: a full read that overlapped one is thrown away. */
  private resets = 0;
  private filling?: Promise<void>;
  private refreshing?: Promise<void>;

  constructor(private readonly ctx: PluginContext, private readonly records: Collection<InstanceRecord>) {
    ctx.store.onChange((change) => {
      if (change.collection === 'instances') this.marked.set(keyOf(change.project, change.name), { project: change.project, name: change.name });
    });
    ctx.cluster.onChange(() => this.reset());
  }

  private reset(): void {
    this.resets++;
    this.filled = false;
    this.docs = new Map();
    this.sorted = undefined;
    this.marked.clear();
  }

  /** The records of `project` (every project when undefined), in the store's order (project, name). */
  async list(project?: string): Promise<StoredDoc<InstanceRecord>[]> {
    if (this.ctx.cluster.enabled) {
      if (this.filled) this.reset();
      return this.records.list(project);
    }
    await this.current();
    if (!this.sorted) {
      this.sorted = [...this.docs.values()].sort(byProjectAndName);
      this.byProject = new Map();
    }
    if (project === undefined) return [...this.sorted];
    let mine = this.byProject.get(project);
    if (!mine) {
      mine = this.sorted.filter((doc) => doc.project === project);
      this.byProject.set(project, mine);
    }
    // A copy of the kept one: a filter of 10,000 documents at every request grew its array step by step.
    return [...mine];
  }

  /**
   * Fill once, then re-read what changed, until nothing changed meanwhile. One round at a time: a
   * reader that found nothing marked while another's round was still reading would answer from the
   * rows that round was about to replace (a delete acknowledged, its row still listed).
   */
  private async current(): Promise<void> {
    for (;;) {
      if (this.refreshing) {
        await this.refreshing;
        continue;
      }
      if (!this.filled) {
        this.filling ??= this.fill().finally(() => (this.filling = undefined));
        await this.filling;
        continue;
      }
      if (!this.marked.size) return;
      // After a burst of changes (thousands of creates) one read of everything beats a read per key.
      if (this.marked.size > REREAD_ALL_AFTER) {
        this.filled = false;
        continue;
      }
      this.refreshing = this.refresh().finally(() => (this.refreshing = undefined));
    }
  }

  /** One round: the marked keys read again. */
  private async refresh(): Promise<void> {
    const resets = this.resets;
    const batch = [...this.marked];
    this.marked.clear();
    const rows = await Promise.all(batch.map(([, at]) => this.records.get(at.project, at.name)));
    if (resets !== this.resets) return;
    batch.forEach(([key], i) => {
      // Changed again while it was read: marked again, read again in the next round.
      if (this.marked.has(key)) return;
      const row = rows[i];
      if (row) this.docs.set(key, row);
      else this.docs.delete(key);
    });
    this.sorted = undefined;
  }

  /** Changes during the read are marked (after the clear) and re-read by current(). */
  private async fill(): Promise<void> {
    const resets = this.resets;
    this.marked.clear();
    const all = await this.records.list();
    if (resets !== this.resets) return;
    this.docs = new Map(all.map((doc) => [keyOf(doc.project, doc.name), doc]));
    this.sorted = undefined;
    this.filled = true;
  }
}

function byProjectAndName(a: StoredDoc<InstanceRecord>, b: StoredDoc<InstanceRecord>): number {
  if (a.project !== b.project) return a.project < b.project ? -1 : 1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}
