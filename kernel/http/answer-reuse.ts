/**
 * Reads answered again with the bytes of the last answer (VerbSpec.reuse, issue 22), while nothing it
 * shows changed. An answer is kept with a token: the kernel's stamp (the store's revision and the
 * daemon's own changes, see ChangeActivity) and the route's own token for the rest. It is taken again
 * only while the token is the same, so a read after any acknowledged write is made afresh. The token is
 * the one read before the handler ran: an answer that overlapped a change is kept under a token that is
 * gone already, so it is never taken (tokens are counters and never come back). Such an answer is not
 * kept at all, which the token read again once it answered tells.
 *
 * Kept by URL as sent and by what the caller may see (a restricted client's answer is its own).
 */
import type { ApiRequest, VerbSpec } from '../../sdk/index.js';
import type { Caller } from './api-request.js';
import { wholeAnswerHead, type Answer } from './answer.js';

/** Bounds: answers larger than this are made every time; the oldest go first past the totals. */
const ANSWER_MAX_BYTES = 2 * 1024 * 1024;
const TOTAL_MAX_BYTES = 8 * 1024 * 1024;
const MAX_ENTRIES = 512;
/**
 * Bodies up to this size are kept as text. Node writes a text body with the head in one call; a buffer
 * takes a second (writev): measured on a 450-byte listing, 24.4 against 18.3 us of CPU per answer.
 */
const TEXT_MAX_BYTES = 64 * 1024;

type Reuse = NonNullable<VerbSpec['reuse']>;

interface Kept {
  token: string;
  answer: Answer;
  bytes: number;
  /** The route's own token for this answer's request, read again when it is taken by URL alone (taken()). */
  own?: () => string | undefined;
}

/** A lookup that missed: what keep() needs to keep the answer made instead. */
export interface ReuseSlot {
  key: string;
  token: string;
  reuse: Reuse;
}

export class AnswerReuse {
  private readonly kept = new Map<string, Kept>();
  private bytes = 0;

  /** `stamp`: equal while neither the store nor the daemon changed anything; undefined when it cannot tell. */
  constructor(private readonly stamp: () => string | undefined) {}

  /** The kept answer when it still holds; otherwise a slot for keep(), or undefined when nothing may be kept now. */
  lookup(reuse: Reuse, req: ApiRequest, caller: Caller, url: string): Answer | ReuseSlot | undefined {
    const token = this.token(reuse, req);
    if (token === undefined) return undefined;
    const key = keyOf(reach(caller), url);
    const kept = this.kept.get(key);
    if (kept?.token === token) return kept.answer;
    return { key, token, reuse };
  }

  /**
   * The kept answer for `url` asked by a caller of `reach` (reach()), when it still holds: asked before
   * any request is made of it, on a listener whose callers are all the same. A URL and a reach that
   * passed the access and project checks before pass them again while the stamp is unchanged.
   */
  taken(reach: string, url: string): Answer | undefined {
    const kept = this.kept.get(keyOf(reach, url));
    if (kept === undefined) return undefined;
    const stamp = this.stamp();
    if (stamp === undefined) return undefined;
    if (kept.own === undefined) return kept.token === stamp ? kept.answer : undefined;
    const own = kept.own();
    return own !== undefined && kept.token === `${stamp}/${own}` ? kept.answer : undefined;
  }

  /**
   * Keep `answer` for `slot` when it is a whole 200 and nothing changed while it was made. `detached`:
   * the request without what ties it to its connection, for a route token read again later.
   */
  keep(slot: ReuseSlot, req: ApiRequest, answer: Answer, detached: () => ApiRequest): void {
    if (answer.status !== 200 || this.token(slot.reuse, req) !== slot.token) return;
    const body = answer.body;
    if (typeof body !== 'string' && !Buffer.isBuffer(body)) return;
    const bytes = typeof body === 'string' ? body.length * 2 : body.length;
    if (bytes > ANSWER_MAX_BYTES) return;
    this.drop(slot.key);
    // JSON is well-formed UTF-8 (JSON.stringify escapes lone surrogates): its text is the same bytes.
    const text = Buffer.isBuffer(body) && body.length <= TEXT_MAX_BYTES ? body.toString('utf8') : body;
    const kept: Answer = { ...answer, body: text };
    kept.head = wholeAnswerHead(kept);
    const reuse = slot.reuse;
    let own: Kept['own'];
    if (reuse !== true) {
      const probe = detached();
      own = () => reuse(probe);
    }
    this.kept.set(slot.key, { token: slot.token, answer: kept, bytes, own });
    this.bytes += bytes;
    for (const oldest of this.kept.keys()) {
      if (this.bytes <= TOTAL_MAX_BYTES && this.kept.size <= MAX_ENTRIES) break;
      this.drop(oldest);
    }
  }

  private drop(key: string): void {
    const kept = this.kept.get(key);
    if (!kept) return;
    this.kept.delete(key);
    this.bytes -= kept.bytes;
  }

  private token(reuse: Reuse, req: ApiRequest): string | undefined {
    const stamp = this.stamp();
    if (stamp === undefined || reuse === true) return stamp;
    const own = reuse(req);
    return own === undefined ? undefined : `${stamp}/${own}`;
  }
}

const keyOf = (reach: string, url: string) => `${reach}\0${url}`;

/** What a caller may see: everything (trusted), some projects (restricted), or what anyone may. */
export function reach(caller: Caller): string {
  if (!caller.trusted) return caller.metrics ? 'metrics' : 'untrusted';
  return caller.projects ? `projects:${caller.projects.join('/')}` : 'trusted';
}
