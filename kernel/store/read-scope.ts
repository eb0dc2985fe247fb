/**
 * One freshness check per request instead of one per read. A read on etcd must see every write
 * acknowledged before it began; within one request, a check sent after the request began already
 * covers every write acknowledged before the request. A write acknowledged later (on another member)
 * can reach the request's work only through news from outside this process: a peer's answer or
 * message, another API request, a client's websocket message. Each of those bumps an epoch, and a
 * read after it checks again. This member's own writes are in the copy at their acknowledgement.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

interface Checked {
  epoch: number;
  revision: Promise<number>;
  /** The revision once known. */
  value?: number;
}

interface ReadScope {
  checked?: Checked;
}

const scopes = new AsyncLocalStorage<ReadScope>();
/** Bumped by all news from outside: a check sent before it may predate a write the news depends on. */
let epoch = 0;

/** Run a request's work in a scope of its own (the pipeline calls this for each request in a cluster). */
export function withReadScope<R>(fn: () => R): R {
  return scopes.run({}, fn);
}

/** News from outside arrived (a peer's answer or message, a request, a websocket message): checks sent before it no longer count. */
export function noteNews(): void {
  epoch++;
}

/** The revision a read must wait for: the scope's check while still valid, else a new one from `check`. */
export function revisionToReach(check: () => Promise<number>): Promise<number> {
  const scope = scopes.getStore();
  if (!scope) return check();
  if (scope.checked?.epoch === epoch) return scope.checked.revision;
  const checked: Checked = { epoch, revision: check() };
  scope.checked = checked;
  checked.revision.then((value) => {
    checked.value = value;
  }, () => undefined);
  // A failed check (no quorum) is not kept: the next read asks again.
  checked.revision.catch(() => {
    if (scope.checked === checked) scope.checked = undefined;
  });
  return checked.revision;
}

/** The revision this request has checked, while still valid: a peer asked on the request's behalf may reuse it. */
export function scopeRevision(): number | undefined {
  const checked = scopes.getStore()?.checked;
  return checked?.epoch === epoch ? checked.value : undefined;
}

/**
 * A request a peer sent on behalf of its own request, with the revision that request checked: this
 * member's reads for it wait for that revision instead of checking again. Part of one request, the
 * peer's check covers it as it covers the peer's own reads. Only peers may send it (peer-headers.ts).
 */
export function adoptPeerRevision(header: string | string[] | undefined): void {
  const scope = scopes.getStore();
  const value = typeof header === 'string' && /^[0-9]{1,15}$/.test(header) ? Number(header) : undefined;
  if (!scope || scope.checked || !value) return;
  scope.checked = { epoch, revision: Promise.resolve(value), value };
}
