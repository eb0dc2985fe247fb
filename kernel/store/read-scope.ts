/**
 * One freshness check per request instead of one per read. A read on etcd must see every write
 * acknowledged before it began; within one request, a check sent after the request began already
 * covers every write acknowledged before the request, and the request can only learn of a later write
 * (acknowledged on another member) through a message from a peer. So the request's reads share its
 * first check until news from a peer arrives (an answer, a websocket message), after which the next
 * read checks again. This member's own writes are in the copy at their acknowledgement.
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
/** Bumped by every message from a peer: a check sent before it may predate a write the peer acknowledged. */
let epoch = 0;

/** Run a request's work in a scope of its own (the pipeline calls this for each request in a cluster). */
export function withReadScope<R>(fn: () => R): R {
  return scopes.run({}, fn);
}

/** A peer's answer or message arrived: checks sent before it no longer count. */
export function noteNewsFromPeers(): void {
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
