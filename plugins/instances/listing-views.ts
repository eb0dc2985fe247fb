/**
 * What a listing builds per instance, kept while it stays true: the handle (profiles applied, paths
 * looked up) and the recursion=1 view for each status seen, frozen so that the kernel serialises it
 * once (see the pipeline's fragment cache). Keyed by the record document itself: the record index
 * hands out a new document for every change, so an edit, rename or delete is a miss by construction.
 * What else a view shows comes from profiles and projects: any change of those (the same lifecycle
 * events that empty the profile cache) starts a new generation. The status is asked every time.
 * In a cluster the records come straight from the store (new documents each time): nothing is kept.
 */
import type { InstanceStatus, InstanceSummary, StoredDoc } from '../../sdk/index.js';
import type { InstanceHandle } from './access.js';
import type { InstanceRecord } from './record.js';

/** What render.ts makes (kept opaque here: render.ts reads the manager, which holds these). */
type View = object;
/** recursion=2: the parts read to decide whether a kept view still holds. */
type FullView = { status: InstanceStatus; state: { disk: object } };
interface Children { snapshots?: Map<string, unknown[]>; backups?: Map<string, unknown[]> }

interface Entry {
  generation: number;
  handle: InstanceHandle;
  views: Map<InstanceStatus, Readonly<View>>;
  /** recursion=2 while stopped with no snapshot, no backup and no disk usage to tell: nothing in it moves. */
  stopped?: Readonly<FullView>;
}

export class ListingViews {
  private readonly entries = new WeakMap<StoredDoc<InstanceRecord>, Entry>();
  /** What the instances service tells other plugins (used_by of networks, project state, the policy gate). */
  private readonly summaries = new WeakMap<StoredDoc<InstanceRecord>, { generation: number; summary: Readonly<InstanceSummary> }>();
  private generation = 0;

  /** Profiles or projects changed: every handle and view made before may show old expanded keys. */
  invalidate(): void {
    this.generation++;
  }

  async handle(stored: StoredDoc<InstanceRecord>, make: () => Promise<InstanceHandle>): Promise<InstanceHandle> {
    const entry = this.entries.get(stored);
    if (entry && entry.generation === this.generation) return entry.handle;
    const generation = this.generation;
    const handle = await make();
    // A change of generation while it was made: this one may be old already.
    if (generation === this.generation) this.entries.set(stored, { generation, handle, views: new Map() });
    return handle;
  }

  /** The kept summary of `stored`, if it still holds: a listing of thousands then waits only for the missing ones. */
  summaryNow(stored: StoredDoc<InstanceRecord>): Readonly<InstanceSummary> | undefined {
    const kept = this.summaries.get(stored);
    return kept && kept.generation === this.generation ? kept.summary : undefined;
  }

  async summary(stored: StoredDoc<InstanceRecord>, make: () => Promise<InstanceSummary>): Promise<Readonly<InstanceSummary>> {
    const kept = this.summaryNow(stored);
    if (kept) return kept;
    const generation = this.generation;
    const summary = Object.freeze(await make());
    if (generation === this.generation) this.summaries.set(stored, { generation, summary });
    return summary;
  }

  /**
   * The recursion=1 view without waiting, when the handle is kept and its driver tells the status
   * synchronously; undefined otherwise (the caller takes the asynchronous way).
   */
  viewNow(stored: StoredDoc<InstanceRecord>, make: (handle: InstanceHandle, status: InstanceStatus) => View): Readonly<View> | undefined {
    const entry = this.entries.get(stored);
    const driver = entry?.handle.driver;
    if (!entry || entry.generation !== this.generation || !driver?.statusNow) return undefined;
    let status: InstanceStatus;
    try {
      status = driver.statusNow(entry.handle.inst);
    } catch {
      status = 'Error';
    }
    return keptView(entry, status, make);
  }

  /** The recursion=1 view; `handle` must come from handle() for the same document. */
  view(stored: StoredDoc<InstanceRecord>, handle: InstanceHandle, status: InstanceStatus, make: (handle: InstanceHandle, status: InstanceStatus) => View): Readonly<View> {
    const entry = this.entries.get(stored);
    if (!entry || entry.handle !== handle) return make(handle, status);
    return keptView(entry, status, make);
  }

  /**
   * The kept recursion=2 view of a stopped instance without waiting, when its driver tells synchronously
   * that it is still stopped; undefined otherwise (the caller takes the asynchronous way). Most of a large
   * listing is such instances, and a promise chain for each was most of what the listing allocated.
   */
  fullNow(stored: StoredDoc<InstanceRecord>, children: Children): Readonly<object> | undefined {
    const entry = this.entries.get(stored);
    const driver = entry?.handle.driver;
    if (!entry?.stopped || entry.generation !== this.generation || !driver?.statusNow || !childless(stored, children)) return undefined;
    try {
      return driver.statusNow(entry.handle.inst) === 'Stopped' ? entry.stopped : undefined;
    } catch {
      return undefined;
    }
  }

  /** The recursion=2 view; `handle` must come from handle() for the same document. */
  async full<V extends FullView>(stored: StoredDoc<InstanceRecord>, handle: InstanceHandle, children: Children, make: () => Promise<V>): Promise<Readonly<V>> {
    const entry = this.entries.get(stored);
    if (!entry || entry.handle !== handle) return make();
    const none = childless(stored, children);
    if (entry.stopped && none && (await handle.driver.status(handle.inst)) === 'Stopped') return entry.stopped as V;
    const view = await make();
    if (none && view.status === 'Stopped' && Object.keys(view.state.disk).length === 0) entry.stopped = Object.freeze(view);
    return view;
  }
}

function childless(stored: StoredDoc<InstanceRecord>, children: Children): boolean {
  const key = `${stored.project}/${stored.name}`;
  return !children.snapshots?.get(key)?.length && !children.backups?.get(key)?.length;
}

function keptView(entry: Entry, status: InstanceStatus, make: (handle: InstanceHandle, status: InstanceStatus) => View): Readonly<View> {
  let view = entry.views.get(status);
  if (!view) entry.views.set(status, (view = Object.freeze(make(entry.handle, status))));
  return view;
}
