/**
 * Forwarding to other members, below every handler: an HTTP request is proxied as it came (method,
 * path and query as sent, headers, body streamed) and its answer streamed back unchanged; a websocket
 * is opened on the member for the caller; and members ask each other directly (`ClusterView.request`).
 * The original caller travels in a header only a peer may send (peer-headers.ts).
 */
import https from 'node:https';
import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type WebSocket from 'ws';
import type Logger from 'bunyan';
import { ApiError, ALLOWED_ERROR_STATUSES, unavailable, type ClusterMemberInfo, type ErrorStatus } from '../../sdk/index.js';
import type { Caller } from '../http/api-request.js';
import { FORWARDED_CALLER_HEADER, READ_REVISION_HEADER, encodeCaller } from './peer-headers.js';
import { parseMemberAddress, type PeerAgents } from './peer-agents.js';
import { noteNews, scopeRevision } from '../store/read-scope.js';

/** A member that does not accept a connection in this time is unreachable (503). */
export const CONNECT_BOUND_MS = 3_000;
/** A member's answer to a direct question (`ClusterView.request`, fan-outs) must come within this. */
export const REQUEST_BOUND_MS = 10_000;
/** Largest websocket message passed on (as the kernel's own websocket server accepts). */
const MAX_PAYLOAD = 16 * 1024 * 1024;

/** Headers that describe one connection, not the message: never passed on by a proxy (RFC 9110 7.6.1). */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host',
  // This member already told the caller to go on (node answers 100 Continue); the body is on its way.
  'expect']);
/** A websocket client makes its own handshake headers. */
const HANDSHAKE = new Set(['sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions', 'sec-websocket-accept']);

/** Called with the Location of an operation a member answered 202 with (who holds which operation). */
export type OperationSeen = (operationId: string, member: string) => void;

export class Forwarder {
  /** Operations created by forwarded requests are remembered here (operation-owners.ts). */
  onOperation: OperationSeen | undefined;
  /**
   * What is under way with each member (proxied requests, forwarded websockets): a member that goes
   * offline or leaves ends them at once, instead of leaving callers on a connection nobody answers.
   */
  private readonly underway = new Map<string, Set<{ end(): void }>>();

  constructor(private readonly agents: PeerAgents, private readonly self: () => string, private readonly log: Logger) {}

  /**
   * Proxy `raw` to `member` for `caller` and stream the answer to `res`. Resolves once the answer has
   * begun (or rejects, before anything was sent, with a 503 naming the member); the body goes on streaming.
   */
  proxy(member: ClusterMemberInfo, raw: IncomingMessage, body: NodeJS.ReadableStream, res: ServerResponse, caller: Caller): Promise<void> {
    const { host, port } = parseMemberAddress(member.address);
    const agent = this.agents.agentFor(member);
    return new Promise<void>((resolve, reject) => {
      let answered = false;
      const upstream = https.request({
        agent, host, port, method: raw.method, path: withTarget(raw.url ?? '/', member.name), headers: this.headersFor(raw.headers, caller, false),
      });
      boundConnect(upstream, member);
      const untrack = this.track(member.name, { end: () => upstream.destroy(unavailable(`Cluster member "${member.name}" went offline`)) });
      upstream.on('close', untrack);
      upstream.on('error', (err) => {
        if (!answered) return reject(unreachable(member, err));
        // The answer broke off midway: the client sees its connection end, as it would from the member itself.
        this.log.debug({ err, member: member.name }, 'forwarded answer broke off');
        res.destroy();
      });
      upstream.on('response', (answer) => {
        answered = true;
        noteNews();
        const location = answer.headers.location;
        if (answer.statusCode === 202 && typeof location === 'string') this.sawOperation(location, member.name);
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, passOn(answer.headers));
        answer.pipe(res);
        answer.on('error', () => res.destroy());
        resolve();
      });
      // A caller that hangs up ends the forwarded request (a wait, a stream) on the member too.
      res.on('close', () => {
        if (!res.writableFinished) upstream.destroy();
      });
      // Without a body the request leaves whole at once: piping an empty body would send it chunked, in two writes,
      // and the member would wait for the end of a body nobody sends.
      if (!hasBody(raw.headers)) return void upstream.end();
      body.on('error', () => upstream.destroy());
      body.pipe(upstream);
    });
  }

  /** Open the websocket `raw` asks for on `member`, for `caller`; a refusal comes back as the member's error. */
  async openWebsocket(member: ClusterMemberInfo, raw: IncomingMessage, caller: Caller): Promise<WebSocket> {
    const { host, port } = parseMemberAddress(member.address);
    const url = `wss://${host.includes(':') ? `[${host}]` : host}:${port}${withTarget(raw.url ?? '/', member.name)}`;
    const ws = await this.connectWebsocket(member, url, this.headersFor(raw.headers, caller, true));
    ws.once('close', this.track(member.name, { end: () => ws.terminate() }));
    return ws;
  }

  /** End what is under way with members that are offline or gone now. */
  dropUnavailable(members: readonly ClusterMemberInfo[]): void {
    const available = new Set(members.filter((m) => m.online).map((m) => m.name));
    for (const [name, work] of this.underway) {
      if (available.has(name)) continue;
      this.underway.delete(name);
      for (const item of work) item.end();
    }
  }

  private track(member: string, item: { end(): void }): () => void {
    let work = this.underway.get(member);
    if (!work) this.underway.set(member, (work = new Set()));
    work.add(item);
    return () => {
      work!.delete(item);
      if (work!.size === 0 && this.underway.get(member) === work) this.underway.delete(member);
    };
  }

  /** A websocket this member opens for itself on `member` (events links): `headers` added to the peer's. */
  peerWebsocket(member: ClusterMemberInfo, path: string, headers: OutgoingHttpHeaders = {}): Promise<WebSocket> {
    const { host, port } = parseMemberAddress(member.address);
    const all = { ...headers, [FORWARDED_CALLER_HEADER]: encodeCaller(this.memberCaller(), this.self()) };
    return this.connectWebsocket(member, `wss://${host.includes(':') ? `[${host}]` : host}:${port}${path}`, all);
  }

  /**
   * Ask `member` directly, as this member or for `caller`, with a JSON body and answer; bounded by
   * `boundMs`, and a member that cannot be reached is a 503 naming it.
   */
  /**
   * `ClusterView.download`: what a GET of `path` on the member answers, written to `file` (image files).
   * 404 from the member is a 404; no answer within the request bound, or a stream that stalls as long, a 503.
   */
  download(member: ClusterMemberInfo, path: string, file: string, boundMs = REQUEST_BOUND_MS): Promise<void> {
    const { host, port } = parseMemberAddress(member.address);
    const agent = this.agents.agentFor(member);
    const headers: OutgoingHttpHeaders = { [FORWARDED_CALLER_HEADER]: encodeCaller(this.memberCaller(), this.self()) };
    return new Promise((resolve, reject) => {
      const upstream = https.request({ agent, host, port, method: 'GET', path, headers });
      // Idle bound: reset by every chunk, so a large file may take as long as it keeps coming.
      upstream.setTimeout(boundMs, () => upstream.destroy(unavailable(`Cluster member "${member.name}" stalled sending ${path}`)));
      upstream.on('error', (err) => reject(unreachable(member, err)));
      upstream.on('response', (answer) => {
        if (answer.statusCode !== 200) {
          answer.resume();
          const status = answer.statusCode === 404 ? 404 : 503;
          reject(new ApiError(status, `Cluster member "${member.name}" answered ${answer.statusCode} for ${path}`));
          return;
        }
        const out = createWriteStream(file);
        pipeline(answer, out).then(() => {
          noteNews();
          resolve();
        }, (err) => reject(unreachable(member, err)));
      });
      upstream.end();
    });
  }

  request(member: ClusterMemberInfo, method: string, path: string, body?: unknown, caller?: Caller, boundMs = REQUEST_BOUND_MS): Promise<{ status: number; body: any }> {
    const { host, port } = parseMemberAddress(member.address);
    const agent = this.agents.agentFor(member);
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: OutgoingHttpHeaders = { accept: 'application/json' };
    if (payload) Object.assign(headers, { 'content-type': 'application/json', 'content-length': payload.length });
    // Marked as forwarded either way, so the member answers itself and never passes the question on.
    headers[FORWARDED_CALLER_HEADER] = encodeCaller(caller ?? this.memberCaller(), this.self());
    withReadRevision(headers);
    return new Promise((resolve, reject) => {
      const upstream = https.request({ agent, host, port, method, path, headers });
      const timer = setTimeout(() => {
        upstream.destroy();
        reject(unavailable(`Cluster member "${member.name}" did not answer within ${boundMs / 1000}s`));
      }, boundMs);
      upstream.on('error', (err) => {
        clearTimeout(timer);
        reject(unreachable(member, err));
      });
      upstream.on('response', (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('error', (err) => {
          clearTimeout(timer);
          reject(unreachable(member, err));
        });
        answer.on('end', () => {
          clearTimeout(timer);
          // What the member did is acknowledged now: this member's store reads check etcd again.
          noteNews();
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch { /* not JSON: handed back as text */ }
          resolve({ status: answer.statusCode ?? 0, body: parsed });
        });
      });
      upstream.end(payload);
    });
  }

  private async connectWebsocket(member: ClusterMemberInfo, url: string, headers: OutgoingHttpHeaders): Promise<WebSocket> {
    const agent = this.agents.agentFor(member);
    // Loaded on first use, as the websocket server is: a member nobody watches never loads ws.
    const { default: WebSocket } = await import('ws');
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, {
        agent, headers: headers as Record<string, string>, perMessageDeflate: false, maxPayload: MAX_PAYLOAD, handshakeTimeout: CONNECT_BOUND_MS,
      });
      // Any message from a member may tell of a write it made: reads after it check the store again.
      ws.on('message', noteNews);
      ws.once('open', () => {
        // Nothing is read until the socket is joined to the caller's (forward-websocket.ts resumes it).
        ws.pause();
        ws.removeAllListeners('error');
        ws.on('error', () => ws.terminate());
        resolve(ws);
      });
      ws.once('error', (err) => reject(unreachable(member, err)));
      ws.once('unexpected-response', (_req, res) => {
        // The member refused the upgrade: its error (status and message) is the caller's answer.
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c.length < 64 * 1024 ? c : ''));
        res.on('end', () => reject(refusalOf(res.statusCode ?? 500, text)));
        res.on('error', (err) => reject(unreachable(member, err)));
      });
    });
  }

  /** The caller's headers as the member gets them: hop-by-hop ones dropped, the caller added. */
  private headersFor(incoming: IncomingHttpHeaders, caller: Caller, websocket: boolean): OutgoingHttpHeaders {
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(incoming)) {
      if (value === undefined || HOP_BY_HOP.has(name) || (websocket && HANDSHAKE.has(name))) continue;
      headers[name] = value;
    }
    headers[FORWARDED_CALLER_HEADER] = encodeCaller(caller, this.self());
    withReadRevision(headers);
    return headers;
  }

  /** This member asking on its own behalf. */
  private memberCaller(): Caller {
    return { trusted: true, requestor: { username: this.self(), protocol: 'cluster', address: '' } };
  }

  private sawOperation(location: string, member: string): void {
    const match = /^\/1\.0\/operations\/([^/?#]+)/.exec(location);
    if (match) this.onOperation?.(decodeURIComponent(match[1]!), member);
  }
}

/**
 * The request target as sent, with `target=<member>` added when the caller named none: the member then
 * knows the request is its own (a placement made here is not made again there). A `target` the caller
 * sent is kept as it is: for a move it names the destination, not the member that answers.
 */
export function withTarget(url: string, member: string): string {
  const query = url.indexOf('?');
  if (query >= 0 && new URLSearchParams(url.slice(query + 1)).has('target')) return url;
  return `${url}${query >= 0 ? (query === url.length - 1 ? '' : '&') : '?'}target=${encodeURIComponent(member)}`;
}

function hasBody(headers: IncomingHttpHeaders): boolean {
  if (headers['transfer-encoding'] !== undefined) return true;
  const length = headers['content-length'];
  return length !== undefined && length !== '0';
}

function passOn(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  return out;
}

/** A new connection gets CONNECT_BOUND_MS to be made; a pooled one is already made. */
function boundConnect(req: import('node:http').ClientRequest, member: ClusterMemberInfo): void {
  req.on('socket', (socket: Socket) => {
    if (!socket.connecting) return;
    const timer = setTimeout(() => req.destroy(unavailable(`Cluster member "${member.name}" (${member.address}) did not accept a connection within ${CONNECT_BOUND_MS / 1000}s`)), CONNECT_BOUND_MS);
    socket.once('secureConnect', () => clearTimeout(timer));
    socket.once('close', () => clearTimeout(timer));
  });
}

function unreachable(member: ClusterMemberInfo, err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const reason = (err as NodeJS.ErrnoException)?.code ?? (err as Error)?.message ?? String(err);
  return Object.assign(unavailable(`Cluster member "${member.name}" (${member.address}) cannot be reached: ${reason}`), { cause: err });
}

function refusalOf(status: number, text: string): ApiError {
  let message = `The cluster member refused the websocket (${status})`;
  try {
    const envelope = JSON.parse(text) as { error?: unknown };
    if (typeof envelope.error === 'string' && envelope.error) message = envelope.error;
  } catch { /* not the error envelope */ }
  const allowed = (ALLOWED_ERROR_STATUSES as readonly number[]).includes(status) ? (status as ErrorStatus) : 500;
  return new ApiError(allowed, message);
}

/** The store revision this request has checked, for the member to read at (kernel/store/read-scope.ts). */
function withReadRevision(headers: OutgoingHttpHeaders): void {
  delete headers[READ_REVISION_HEADER];
  const known = scopeRevision();
  if (known !== undefined) headers[READ_REVISION_HEADER] = String(known);
}
