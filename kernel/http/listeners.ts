/** hapi servers for the unix socket and the TLS listener, with the error envelope on every answer. */
import Hapi from '@hapi/hapi';
import type { Boom } from '@hapi/boom';
import type { TLSSocket } from 'node:tls';
import type { IncomingMessage } from 'node:http';
import { createHash } from 'node:crypto';
import type Logger from 'bunyan';
import { ApiError, type AuthDecision, type TlsClient } from '../../sdk/index.js';
import { allowedStatus, errorBody } from './envelope.js';
import { acceptProxyHeaders, proxiedSource } from './proxy-protocol.js';
import type { Caller } from './api-request.js';

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
}

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
  // Requests node cannot parse never reach hapi: answer them with the envelope too.
  server.listener.on('clientError', (err: NodeJS.ErrnoException, socket: import('node:stream').Duplex) => {
    opts.log.debug({ err: err.message, code: err.code }, 'malformed HTTP request');
    if (!socket.writable || err.code === 'ECONNRESET') return void socket.destroy();
    const body = errorBody(400, `Malformed HTTP request: ${err.code ?? err.message}`);
    socket.end(`HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  });
  if (opts.tls) {
    // Renegotiation could swap the client certificate under a cached identity; the reference has none either.
    server.listener.on('secureConnection', (socket: TLSSocket) => socket.disableRenegotiation());
    if (opts.trustedProxies) {
      acceptProxyHeaders(server.listener, opts.trustedProxies, (from, reason) => opts.log.warn({ from, reason }, 'refused a connection from a trusted proxy'));
    }
  }
  server.ext('onPreResponse', (request, h) => {
    const response = request.response as Boom | Hapi.ResponseObject | null;
    const extra = opts.headers?.();
    if (!response || !('isBoom' in response) || !response.isBoom) {
      if (extra && response) for (const [name, value] of Object.entries(extra)) (response as Hapi.ResponseObject).header(name, value);
      return h.continue;
    }
    const { status, message, metadata } = describeError(response);
    if (status === 500) opts.log.error({ err: response, path: request.path }, 'request failed');
    const answer = h.response(errorBody(status, message, metadata)).type('application/json').code(status);
    if (extra) for (const [name, value] of Object.entries(extra)) answer.header(name, value);
    return answer;
  });
  return server;
}

function describeError(err: Boom): { status: ReturnType<typeof allowedStatus>; message: string; metadata: unknown } {
  if (err instanceof ApiError) return { status: err.status, message: err.message, metadata: err.metadata };
  const code = err.output.statusCode;
  if (code === 413) return { status: 400, message: `Request body too large: ${err.message}`, metadata: null };
  if (code === 415) return { status: 400, message: `Unsupported content type: ${err.message}`, metadata: null };
  if (code >= 500) return { status: 500, message: 'Internal server error', metadata: null };
  return { status: allowedStatus(code), message: err.message || err.output.payload.message, metadata: null };
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
export async function tlsCaller(raw: IncomingMessage, access: string, authenticate: Authenticator): Promise<Caller> {
  const { address, fingerprint, certificate } = peerIdentity(raw.socket as TLSSocket);
  const decision = await authenticate({ address, access, path: raw.url ?? '/', fingerprint, certificate });
  return {
    trusted: decision?.trusted ?? false,
    projects: decision?.projects,
    metrics: decision?.metrics,
    certificate,
    requestor: { username: decision?.username ?? fingerprint ?? '', protocol: 'tls', address },
  };
}
