/** hapi servers for the unix socket and the TLS listener, with the error envelope on every answer. */
import Hapi from '@hapi/hapi';
import type { Boom } from '@hapi/boom';
import type { TLSSocket } from 'node:tls';
import type { IncomingMessage } from 'node:http';
import { createHash } from 'node:crypto';
import type Logger from 'bunyan';
import { forbidden, type AuthDecision, type TlsClient } from '../../sdk/index.js';
import { toHapi } from './answer.js';
import { errorAnswer } from './error-answer.js';
import { answerClientErrors } from './client-errors.js';
import { keepConnectionsOpen } from './connection-timeouts.js';
import { requestTarget } from './request-target.js';
import { bodyLeft, drainBody } from './request-body.js';
import { acceptProxyHeaders, proxiedSource } from './proxy-protocol.js';
import { crossOriginRefusal } from './cross-origin.js';
import type { Caller } from './api-request.js';
import { peerCaller } from '../cluster/peer-headers.js';

/** Everyone who can open the unix socket is trusted (spec part 5.1); mode 0660 limits who can. */
export const UNIX_CALLER: Caller = Object.freeze({
  trusted: true,
  requestor: Object.freeze({ username: process.env.USER ?? 'root', protocol: 'unix', address: '@' }),
});

export interface ServerOptions {
  log: Logger;
  socketPath?: string;
  tls?: { host: string; port: number; key: string; cert: string };
  /** Extra headers on every answer (CORS, from the `core.https_allowed_*` keys); undefined when none. */
  headers?: () => Readonly<Record<string, string>> | undefined;
  /** Sources whose connections start with a PROXY protocol header (`core.https_trusted_proxy`). */
  trustedProxies?: () => ReadonlySet<string>;
  /** Refuse browser requests from other sites but this one (`core.https_allowed_origin`); none refused when undefined. */
  allowedOrigin?: () => string;
}

/** Each server's extra headers, for the fast lane that answers beside hapi on its listener. */
const extraHeaders = new WeakMap<Hapi.Server, NonNullable<ServerOptions['headers']>>();

/** The extra headers `server` puts on every answer (ServerOptions.headers). */
export const answerHeaders = (server: Hapi.Server): ServerOptions['headers'] => extraHeaders.get(server);

export function createHapiServer(opts: ServerOptions): Hapi.Server {
  const server = Hapi.server({
    ...(opts.socketPath ? { port: opts.socketPath } : {}),
    ...(opts.tls ? { host: opts.tls.host, port: opts.tls.port, tls: { key: opts.tls.key, cert: opts.tls.cert, requestCert: true, rejectUnauthorized: false, minVersion: 'TLSv1.2' as const } } : {}),
    compression: false,
    router: { stripTrailingSlash: true },
    routes: { response: { emptyStatusCode: 200 }, timeout: { server: false, socket: false } },
    load: { sampleInterval: 0 },
    debug: false,
  });
  if (opts.headers) extraHeaders.set(server, opts.headers);
  answerClientErrors(server.listener, opts.log);
  keepConnectionsOpen(server.listener);
  if (opts.allowedOrigin) {
    const allowedOrigin = opts.allowedOrigin;
    server.ext('onRequest', (request, h) => {
      const refusal = crossOriginRefusal(request.raw.req.headers, allowedOrigin());
      if (!refusal) return h.continue;
      opts.log.info({ origin: request.headers.origin, path: request.path }, 'refused a browser request from another site');
      throw forbidden(refusal);
    });
  }
  server.ext('onRequest', (request, h) => {
    // hapi's router resolves dot segments (and WHATWG URLs do, %2e too): the path is matched as sent instead.
    const url = request.raw.req.url ?? '/';
    if (url.startsWith('/') && !url.includes('%') && !url.includes('/.')) return h.continue;
    const target = requestTarget(url);
    if (target.dotSegments) (request as { path: string }).path = target.path.length > 1 ? target.path.replace(/\/$/, '') : target.path;
    return h.continue;
  });
  if (opts.tls) {
    // Renegotiation could swap the client certificate under a cached identity; the reference has none either.
    server.listener.on('secureConnection', (socket: TLSSocket) => socket.disableRenegotiation());
    if (opts.trustedProxies) {
      acceptProxyHeaders(server.listener, opts.trustedProxies, (from, reason) => opts.log.warn({ from, reason }, 'refused a connection from a trusted proxy'));
    }
  }
  server.ext('onPreResponse', (request, h) => {
    // What is left of a body nobody read is read and dropped first, so the client can finish sending and read the answer.
    if (bodyLeft(request.raw.req)) return drainBody(request.raw.req, request.raw.res).then(() => answer(request, h));
    return answer(request, h);
  });
  const answer = (request: Hapi.Request, h: Hapi.ResponseToolkit) => {
    const response = request.response as Boom | Hapi.ResponseObject | null;
    const extra = opts.headers?.();
    if (!response || !('isBoom' in response) || !response.isBoom) {
      if (extra && response) for (const [name, value] of Object.entries(extra)) (response as Hapi.ResponseObject).header(name, value);
      return h.continue;
    }
    const answer = toHapi(h, errorAnswer(response, opts.log, request.path));
    if (extra) for (const [name, value] of Object.entries(extra)) answer.header(name, value);
    return answer;
  };
  return server;
}

export type Authenticator = (client: TlsClient) => Promise<AuthDecision | undefined>;

interface PeerIdentity {
  address: string;
  fingerprint?: string;
  certificate?: string;
}

/** The client certificate cannot change on a connection (renegotiation is off): read and hash it once per connection. */
const identities = new WeakMap<TLSSocket, PeerIdentity>();

function peerIdentity(socket: TLSSocket): PeerIdentity {
  let identity = identities.get(socket);
  if (identity) return identity;
  // A connection from a trusted proxy carries its client's address (the raw TCP socket is `_parent`).
  const proxied = proxiedSource((socket as unknown as { _parent?: object })._parent ?? socket);
  const address = proxied ?? `${socket.remoteAddress ?? ''}:${socket.remotePort ?? ''}`;
  const peer = typeof socket.getPeerCertificate === 'function' ? socket.getPeerCertificate(false) : undefined;
  const der = peer && 'raw' in peer ? peer.raw : undefined;
  identity = {
    address,
    fingerprint: der ? createHash('sha256').update(der).digest('hex') : undefined,
    certificate: der ? `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END CERTIFICATE-----\n` : undefined,
  };
  identities.set(socket, identity);
  return identity;
}

/** Who a TLS client is: the certificates family decides through the `authenticate` hook; untrusted otherwise. */
/**
 * `isClusterPeer`: whether a certificate fingerprint is the cluster certificate's; such a client is
 * another member, trusted, and speaks for the caller it forwarded (peer-headers.ts).
 */
export async function tlsCaller(raw: IncomingMessage, access: string, authenticate: Authenticator, isClusterPeer?: (fingerprint: string) => boolean): Promise<Caller> {
  const { address, fingerprint, certificate } = peerIdentity(raw.socket as TLSSocket);
  if (fingerprint && isClusterPeer?.(fingerprint)) {
    return peerCaller(raw.headers, { trusted: true, requestor: { username: fingerprint, protocol: 'tls', address }, certificate });
  }
  const decision = await authenticate({ address, access, path: raw.url ?? '/', fingerprint, certificate });
  return {
    trusted: decision?.trusted ?? false,
    projects: decision?.projects,
    metrics: decision?.metrics,
    certificate,
    requestor: { username: decision?.username ?? fingerprint ?? '', protocol: 'tls', address },
  };
}
