/**
 * What a member tells another when it forwards a request: who the original caller is. These headers
 * are honoured only from a cluster peer (a client presenting the cluster certificate); anyone else's
 * are removed before the request is looked at, so nobody can claim another identity with them.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Caller } from '../http/api-request.js';

/** The original caller, as base64url JSON (`ForwardedCaller`). Its presence also marks the request as forwarded. */
export const FORWARDED_CALLER_HEADER = 'x-corral-forwarded-caller';
/** On `/1.0/events`: a peer asks for this member's own events only (it has its own links to the others). */
export const LOCAL_EVENTS_HEADER = 'x-corral-local-events';

/** The store revision the forwarding member's request has checked: the member's reads wait for it instead of checking again. */
export const READ_REVISION_HEADER = 'x-corral-read-revision';

/** Every header only a peer may send (lowercase, as node gives them). */
const PEER_ONLY = [FORWARDED_CALLER_HEADER, LOCAL_EVENTS_HEADER, READ_REVISION_HEADER];

interface ForwardedCaller {
  /** The member that forwarded (for logs and the loop guard). */
  by: string;
  trusted: boolean;
  username: string;
  protocol: string;
  address: string;
  projects?: string[];
  metrics?: boolean;
  /** The caller's own TLS client certificate (PEM), for handlers that read it (adding oneself with a token). */
  certificate?: string;
}

/** The header value that carries `caller` from member `by` to another member. */
export function encodeCaller(caller: Caller, by: string): string {
  const forwarded: ForwardedCaller = {
    by,
    trusted: caller.trusted,
    username: caller.requestor.username,
    protocol: caller.requestor.protocol,
    address: caller.requestor.address,
  };
  if (caller.projects) forwarded.projects = [...caller.projects];
  if (caller.metrics) forwarded.metrics = true;
  if (caller.certificate) forwarded.certificate = caller.certificate;
  return Buffer.from(JSON.stringify(forwarded)).toString('base64url');
}

/**
 * Who a request from cluster peer `peer` speaks for: the caller it forwarded, or the peer itself (a
 * member asking on its own behalf, `ClusterView.request`), trusted and unrestricted.
 */
export function peerCaller(headers: IncomingHttpHeaders, peer: Caller): Caller {
  const value = headers[FORWARDED_CALLER_HEADER];
  if (typeof value !== 'string') return { ...peer, trusted: true, peer: true };
  const forwarded = decodeCaller(value);
  // A peer that sends a header it cannot have made is treated as itself asking, with nothing claimed for anyone.
  if (!forwarded) return { ...peer, trusted: true, peer: true };
  return {
    trusted: forwarded.trusted,
    requestor: { username: forwarded.username, protocol: forwarded.protocol, address: forwarded.address },
    ...(forwarded.projects ? { projects: forwarded.projects } : {}),
    ...(forwarded.metrics ? { metrics: true } : {}),
    ...(typeof forwarded.certificate === 'string' ? { certificate: forwarded.certificate } : {}),
    peer: true,
    forwardedBy: forwarded.by,
  };
}

function decodeCaller(value: string): ForwardedCaller | undefined {
  try {
    const parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as Partial<ForwardedCaller>;
    if (typeof parsed.by !== 'string' || typeof parsed.trusted !== 'boolean' || typeof parsed.username !== 'string'
      || typeof parsed.protocol !== 'string' || typeof parsed.address !== 'string') return undefined;
    if (parsed.projects !== undefined && !(Array.isArray(parsed.projects) && parsed.projects.every((p) => typeof p === 'string'))) return undefined;
    return parsed as ForwardedCaller;
  } catch {
    return undefined;
  }
}

/** Remove what only a peer may say from a request that does not come from one. */
export function stripPeerHeaders(headers: IncomingHttpHeaders): void {
  for (const name of PEER_ONLY) delete headers[name];
}

/** Whether a request arrived from another member that forwarded it (it must not be forwarded again). */
export const isForwarded = (caller: Caller): boolean => caller.forwardedBy !== undefined;
