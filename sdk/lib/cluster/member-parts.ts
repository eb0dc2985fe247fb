/**
 * Objects every cluster member holds a part of (a storage pool's directory, a network's bridge), as the
 * reference has them: defined member by member with member-specific keys (`--target`), then created
 * cluster-wide, and each member makes its part when it sees the shared record say so. The record in the
 * shared store is the only channel between members: no member calls another, so a member that was down
 * makes its part when it comes back. Deletion goes the same way.
 */
import {
  badRequest, conflict, preconditionFailed, unavailable,
  type ClusterView, type Collection, type MemberConfigEntry, type StoreChange,
} from '../../index.js';

/** Where one member stands with an object: defined, made on its host, or failed there. */
export type MemberPartState = 'Pending' | 'Created' | 'Errored';

export interface MemberPart {
  /** Its member-specific keys. */
  config: Record<string, string>;
  state: MemberPartState;
  /** Why the part could not be made (`Errored`), or why the last cluster-wide edit failed on this member. */
  error?: string;
  /** The record's `generation` this member's host was last brought in line with (absent: 0). */
  applied?: number;
}

/** The fields a record of such an object carries in a cluster (absent standalone). */
export interface MemberPartsRecord {
  name: string;
  description: string;
  config: Record<string, string>;
  members?: Record<string, MemberPart>;
  /** False while only defined member by member; true once the cluster-wide create was asked. */
  created?: boolean;
  /** A cluster-wide delete was asked: each member removes its part and its entry. */
  deleting?: boolean;
  /** Counts cluster-wide edits of the shared keys: each member applies them and records it in its part's `applied`. */
  generation?: number;
  /** The shared keys and description before the last cluster-wide edit, so that a member can tell what changed. */
  before?: SharedEdit;
}

/** What a cluster-wide edit replaces. */
export interface SharedEdit {
  description: string;
  config: Record<string, string>;
}

/** The status the reference shows: pending until made everywhere, errored when a member failed. */
export function clusterStatus(record: MemberPartsRecord): 'Pending' | 'Created' | 'Errored' {
  const parts = Object.values(record.members ?? {});
  if (!record.created || parts.some((p) => p.state === 'Pending')) return 'Pending';
  return parts.some((p) => p.state === 'Errored') ? 'Errored' : 'Created';
}

/** The keys `member`'s host uses: the shared ones and its own. */
export const memberConfig = (record: MemberPartsRecord, member: string | undefined): Record<string, string> =>
  ({ ...record.config, ...(member !== undefined ? record.members?.[member]?.config : undefined) });

export interface MemberPartsOptions<R extends MemberPartsRecord> {
  cluster: ClusterView;
  records: Collection<R>;
  /** The store collection's name, to pick its changes out of the feed. */
  collection: string;
  onChange(listener: (change: StoreChange) => void): void;
  /** `Storage pool`, `Network`: how messages name the object. */
  what: string;
  /** The reference's entity name in `member_config` (`storage-pool`, `network`). */
  entity: string;
  isMemberKey(key: string): boolean;
  /** Keys a joiner is asked for, per record (GET /1.0/cluster `member_config`). */
  joinKeys(record: R): string[];
  /** Make this member's part on its host; answers its member-specific keys as made (defaults filled). */
  make(project: string, record: R, part: MemberPart): Promise<Record<string, string>>;
  /**
   * Bring this member's host in line with the record's keys after a cluster-wide edit (absent: the object's
   * edits need nothing on the hosts). Throws, having undone what it changed, when this host cannot take them.
   */
  apply?(project: string, record: R, part: MemberPart): Promise<void>;
  /** Remove this member's part from its host. */
  remove(project: string, record: R): Promise<void>;
  /** Told after this member's part was made or removed (caches, server info). */
  changed?(project: string, name: string, part: MemberPart | undefined): void;
  log: { error(obj: object, msg: string): void };
}

/** How long a cluster-wide create or delete waits for every member's part. */
const PARTS_BOUND_MS = 60_000;
/** How often a part's write is retried when other members write the record in between. */
const WRITE_ATTEMPTS = 20;

const key = (project: string, name: string) => `${project}\0${name}`;

export class MemberParts<R extends MemberPartsRecord> {
  private readonly working = new Map<string, Promise<void>>();
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(private readonly opts: MemberPartsOptions<R>) {
    opts.onChange((change) => {
      if (change.collection !== opts.collection) return;
      for (const wake of this.waiters.get(key(change.project, change.name)) ?? []) wake();
      if (opts.cluster.enabled && change.kind === 'put') {
        void this.reconcile(change.project, change.name).catch((err) => opts.log.error({ err, name: change.name }, `making this member's part of a ${opts.what.toLowerCase()} failed`));
      }
    });
  }

  private get self(): string {
    return this.opts.cluster.serverName;
  }

  /**
   * `--target`: define this member's part (only member-specific keys); `record` carries name, description
   * and type; `same` throws when a record defined earlier does not match it (another driver or type).
   */
  async define(project: string, record: R, same?: (defined: R) => void): Promise<void> {
    const { what } = this.opts;
    for (const k of Object.keys(record.config)) {
      if (!this.opts.isMemberKey(k)) throw badRequest(`Config key "${k}" may not be used as member-specific key`);
    }
    const part: MemberPart = { config: record.config, state: 'Pending' };
    const stored = await this.opts.records.get(project, record.name);
    if (!stored) {
      await this.opts.records.put(project, record.name, { ...record, config: {}, members: { [this.self]: part }, created: false }, 0);
      return;
    }
    if (!stored.doc.members) throw conflict(`${what} "${record.name}" already exists`);
    same?.(stored.doc);
    if (stored.doc.members[this.self]) throw conflict(`${what} "${record.name}" is already defined on member "${this.self}"`);
    await this.opts.records.put(project, record.name, { ...stored.doc, members: { ...stored.doc.members, [this.self]: part } }, stored.rev);
  }

  /**
   * The cluster-wide create: every member must have defined its part; each makes it and this waits for
   * all. `same` throws when the record defined earlier does not match what is asked (another driver or type).
   */
  async createEverywhere(project: string, record: R, same: (defined: R) => void): Promise<void> {
    const { what } = this.opts;
    for (const k of Object.keys(record.config)) {
      if (this.opts.isMemberKey(k)) throw badRequest(`Config key "${k}" is member-specific: give it with --target for each member`);
    }
    const everyone = this.opts.cluster.members().map((m) => m.name);
    let stored = await this.opts.records.get(project, record.name);
    if (!stored && everyone.length <= 1) {
      // A cluster of one needs no definition step, as in the reference.
      await this.define(project, { ...record, config: {} });
      stored = await this.opts.records.get(project, record.name);
    }
    if (!stored) throw badRequest(`${what} "${record.name}" is not defined on any member (define it with --target on each member first)`);
    same(stored.doc);
    const parts = stored.doc.members ?? {};
    if (!stored.doc.members || (stored.doc.created && !Object.values(parts).some((p) => p.state === 'Errored'))) {
      throw conflict(`${what} "${record.name}" already exists`);
    }
    const missing = everyone.filter((name) => !parts[name]);
    if (missing.length) throw badRequest(`${what} "${record.name}" is not defined on member${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`);
    this.checkOnline(Object.keys(parts), 'created');
    const retried: Record<string, MemberPart> = {};
    for (const [name, part] of Object.entries(parts)) retried[name] = part.state === 'Created' ? part : { config: part.config, state: 'Pending' };
    await this.opts.records.put(project, record.name, {
      ...stored.doc, description: record.description || stored.doc.description, config: record.config, members: retried, created: true,
    }, stored.rev);
    const final = await this.waitFor(project, record.name, (r) => !r || Object.values(r.members ?? {}).every((p) => p.state !== 'Pending'));
    const failed = Object.entries(final?.members ?? {}).filter(([, p]) => p.state === 'Errored');
    if (failed.length) {
      throw badRequest(`${what} "${record.name}" could not be created on ${failed.map(([name, p]) => `member "${name}": ${p.error ?? 'unknown error'}`).join('; ')}`);
    }
  }

  /** The cluster-wide delete: every member removes its part; the record goes once none is left. */
  async deleteEverywhere(project: string, name: string): Promise<void> {
    const stored = await this.opts.records.get(project, name);
    if (!stored) return;
    this.checkOnline(Object.keys(stored.doc.members ?? {}), 'deleted');
    await this.opts.records.put(project, name, { ...stored.doc, deleting: true }, stored.rev);
    try {
      await this.waitFor(project, name, (r) => !r || Object.keys(r.members ?? {}).length === 0);
    } catch (err) {
      // Members that did not answer keep their part: the object stays, and a second delete finishes it.
      const now = await this.opts.records.get(project, name);
      if (now) await this.opts.records.put(project, name, { ...now.doc, deleting: false }, now.rev).catch(() => undefined);
      throw err;
    }
    const emptied = await this.opts.records.get(project, name);
    if (emptied) await this.opts.records.delete(project, name, emptied.rev);
  }

  /** Make or remove this member's part when the record asks for it (from the change feed, and at boot). */
  reconcile(project: string, name: string): Promise<void> {
    const k = key(project, name);
    const running = this.working.get(k);
    if (running) return running.then(() => this.reconcile(project, name));
    const work = this.reconcileOnce(project, name).finally(() => this.working.delete(k));
    this.working.set(k, work);
    return work;
  }

  /**
   * Boot: this member's host was just brought up from the records as they are; a part left behind the
   * last edit (the member stopped while it ran) records that it caught up, so that no edit waits for it.
   */
  async catchUp(): Promise<void> {
    if (!this.opts.cluster.enabled) return;
    for (const stored of await this.opts.records.list()) {
      const part = stored.doc.members?.[this.self];
      if (part?.state !== 'Created' || (part.applied ?? 0) >= (stored.doc.generation ?? 0)) continue;
      await this.reconcile(stored.project, stored.name)
        .catch((err) => this.opts.log.error({ err, name: stored.name }, `applying a change of a ${this.opts.what.toLowerCase()} on this member failed`));
    }
  }

  private async reconcileOnce(project: string, name: string): Promise<void> {
    const stored = await this.opts.records.get(project, name);
    const part = stored?.doc.members?.[this.self];
    if (!stored || !part) return;
    if (stored.doc.deleting) {
      if (part.state === 'Created') await this.opts.remove(project, stored.doc);
      await this.writePart(project, name, undefined);
      this.opts.changed?.(project, name, undefined);
      return;
    }
    if (!stored.doc.created) return;
    if (part.state === 'Pending') {
      await this.writePart(project, name, await this.makePart(project, stored.doc, part));
      return;
    }
    const generation = stored.doc.generation ?? 0;
    if (part.state !== 'Created' || !this.opts.apply || (part.applied ?? 0) >= generation) return;
    let error: string | undefined;
    try {
      await this.opts.apply(project, stored.doc, part);
    } catch (err) {
      this.opts.log.error({ err, name }, `applying a change of a ${this.opts.what.toLowerCase()} on this member failed`);
      error = (err as Error).message;
    }
    await this.writePart(project, name, (current) => {
      const next: MemberPart = { ...current, applied: generation };
      if (error === undefined) delete next.error;
      else next.error = error;
      return next;
    });
  }

  /** The shared keys of an edit without `target`: a member key is refused (it needs `--target`), '' unsets. */
  sharedKeysOf(config: Record<string, string>): Record<string, string> {
    const shared: Record<string, string> = {};
    for (const [k, value] of Object.entries(config)) {
      if (this.opts.isMemberKey(k)) {
        if (value !== '') throw badRequest(`Config key "${k}" is member-specific: change it with --target for each member`);
        continue;
      }
      if (value !== '') shared[k] = value;
    }
    return shared;
  }

  /**
   * This member's own keys in an edit with `target`: shared keys may only come with their current value
   * (clients send the whole config they read), as the reference checks; '' unsets.
   */
  ownKeysOf(record: R, config: Record<string, string>): Record<string, string> {
    const current = memberConfig(record, this.self);
    const own: Record<string, string> = {};
    for (const [k, value] of Object.entries(config)) {
      if (this.opts.isMemberKey(k)) {
        if (value !== '') own[k] = value;
      } else if (current[k] !== value) {
        throw badRequest(`Config key "${k}" may not be used as member-specific key`);
      }
    }
    return own;
  }

  /**
   * The cluster-wide edit of the shared keys and description: the record is written with the next
   * generation, each member applies it on its host (`apply`) and records that in its part, and this waits
   * (bounded) for all. When a member fails, or one does not answer, every member goes back to the keys
   * before the edit and the failure is reported.
   */
  async editEverywhere(project: string, name: string, edit: SharedEdit, rev: number): Promise<void> {
    const { what } = this.opts;
    const stored = await this.opts.records.get(project, name);
    if (!stored || !stored.doc.members) throw badRequest(`${what} "${name}" is not a cluster's`);
    if (stored.rev !== rev) throw preconditionFailed(`${what} "${name}" changed meanwhile`);
    if (clusterStatus(stored.doc) !== 'Created') throw badRequest(`${what} "${name}" is not created on every member`);
    this.checkOnline(Object.keys(stored.doc.members), 'changed');
    const before: SharedEdit = { description: stored.doc.description, config: stored.doc.config };
    const generation = (stored.doc.generation ?? 0) + 1;
    await this.opts.records.put(project, name, { ...stored.doc, ...edit, generation, before }, stored.rev);
    let failure: string;
    try {
      const final = await this.waitFor(project, name, appliedEverywhere(generation));
      const failed = Object.entries(final?.members ?? {}).filter(([, p]) => p.applied === generation && p.error !== undefined);
      if (!failed.length) return;
      failure = failed.map(([member, p]) => `member "${member}": ${p.error}`).join('; ');
    } catch (err) {
      failure = (err as Error).message;
    }
    await this.revertEdit(project, name, before);
    throw badRequest(`${what} "${name}" could not be changed on ${failure}`);
  }

  /** Put the shared keys back as they were before a failed edit, on every member (bounded; a failure is logged). */
  private async revertEdit(project: string, name: string, before: SharedEdit): Promise<void> {
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const now = await this.opts.records.get(project, name);
      if (!now) return;
      const generation = (now.doc.generation ?? 0) + 1;
      const failed: SharedEdit = { description: now.doc.description, config: now.doc.config };
      try {
        await this.opts.records.put(project, name, { ...now.doc, ...before, generation, before: failed }, now.rev);
      } catch (err) {
        if ((err as { status?: number }).status === 412) continue;
        this.opts.log.error({ err, name }, `reverting a failed change of a ${this.opts.what.toLowerCase()} failed`);
        return;
      }
      await this.waitFor(project, name, appliedEverywhere(generation))
        .catch((err) => this.opts.log.error({ err, name }, `a member did not revert a failed change of a ${this.opts.what.toLowerCase()}`));
      return;
    }
  }

  private async makePart(project: string, record: R, part: MemberPart): Promise<MemberPart> {
    let made: MemberPart;
    try {
      made = { config: await this.opts.make(project, record, part), state: 'Created', applied: record.generation ?? 0 };
    } catch (err) {
      this.opts.log.error({ err, name: record.name }, `making this member's part of a ${this.opts.what.toLowerCase()} failed`);
      made = { ...part, state: 'Errored', error: (err as Error).message };
    }
    this.opts.changed?.(project, record.name, made);
    return made;
  }

  /**
   * Record this member's part (or its removal), retrying when another member wrote in between; a function
   * derives the part from the one stored at the time of the write.
   */
  private async writePart(project: string, name: string, part: MemberPart | undefined | ((current: MemberPart) => MemberPart)): Promise<void> {
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const stored = await this.opts.records.get(project, name);
      if (!stored) return;
      const members = { ...stored.doc.members };
      const current = members[this.self];
      const next = typeof part === 'function' ? (current && part(current)) : part;
      if (typeof part === 'function' && !current) return;
      if (next) members[this.self] = next;
      else delete members[this.self];
      try {
        await this.opts.records.put(project, name, { ...stored.doc, members }, stored.rev);
        return;
      } catch (err) {
        if ((err as { status?: number }).status !== 412) throw err;
      }
    }
    throw unavailable(`${this.opts.what} "${name}" changed too often to record this member's part`);
  }

  /** Enable: this server's objects become the cluster's, their member-specific keys this member's part. */
  async split(): Promise<void> {
    for (const stored of await this.opts.records.list()) {
      if (stored.doc.members) continue;
      const shared: Record<string, string> = {};
      const own: Record<string, string> = {};
      for (const [k, v] of Object.entries(stored.doc.config)) (this.opts.isMemberKey(k) ? own : shared)[k] = v;
      const record = { ...stored.doc, config: shared, members: { [this.self]: { config: own, state: 'Created' as const } }, created: true };
      await this.opts.records.put(stored.project, stored.name, record, stored.rev);
    }
  }

  /** Join: make this member's part of every object the cluster has, from the joiner's `member_config`. */
  async join(memberConfig: MemberConfigEntry[]): Promise<void> {
    const made: { project: string; record: R }[] = [];
    try {
      for (const stored of await this.opts.records.list()) {
        if (!stored.doc.members) continue;
        const own: Record<string, string> = {};
        for (const entry of memberConfig) {
          if (entry.entity === this.opts.entity && entry.name === stored.name && entry.value !== '') own[entry.key] = entry.value;
        }
        const part = await this.makePart(stored.project, stored.doc, { config: own, state: 'Pending' });
        if (part.state === 'Errored') throw badRequest(`${this.opts.what} "${stored.name}" could not be created on this member: ${part.error}`);
        made.push({ project: stored.project, record: { ...stored.doc, members: { [this.self]: part } } });
        await this.writePart(stored.project, stored.name, part);
      }
    } catch (err) {
      for (const { project, record } of made.reverse()) await this.opts.remove(project, record).catch(() => undefined);
      throw err;
    }
  }

  /** What a joiner must give for each object (GET /1.0/cluster `member_config`). */
  async keysForJoiners(): Promise<MemberConfigEntry[]> {
    const entries: MemberConfigEntry[] = [];
    for (const { doc } of await this.opts.records.list()) {
      if (!doc.members) continue;
      for (const k of this.opts.joinKeys(doc)) {
        entries.push({ entity: this.opts.entity, name: doc.name, key: k, value: '', description: `"${k}" property for ${this.opts.what.toLowerCase()} "${doc.name}"` });
      }
    }
    return entries;
  }

  private checkOnline(members: string[], verb: string): void {
    for (const name of members) {
      if (this.opts.cluster.members().find((m) => m.name === name)?.online === false) {
        throw unavailable(`Cluster member "${name}" is offline: the ${this.opts.what.toLowerCase()} cannot be ${verb} there`);
      }
    }
  }

  /** Wait (bounded) until `done` holds for the record (undefined once deleted). */
  private async waitFor(project: string, name: string, done: (record: R | undefined) => boolean): Promise<R | undefined> {
    const k = key(project, name);
    const deadline = Date.now() + PARTS_BOUND_MS;
    for (;;) {
      const current = (await this.opts.records.get(project, name))?.doc;
      if (done(current)) return current;
      const left = deadline - Date.now();
      if (left <= 0) throw unavailable(`${this.opts.what} "${name}": not every cluster member answered within ${PARTS_BOUND_MS / 1000} s`);
      await new Promise<void>((resolve) => {
        const set = this.waiters.get(k) ?? new Set();
        this.waiters.set(k, set);
        const wake = () => {
          set.delete(wake);
          if (!set.size) this.waiters.delete(k);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(wake, Math.min(left, 1000));
        set.add(wake);
      });
    }
  }
}

/** A wait's end: the record is gone, or every member applied the edit of `generation`. */
function appliedEverywhere(generation: number): (record: MemberPartsRecord | undefined) => boolean {
  return (r) => !r || Object.values(r.members ?? {}).every((p) => (p.applied ?? 0) >= generation);
}
