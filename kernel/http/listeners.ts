/** hapi servers for the unix socket and the TLS listener, with the error envelope on every answer. */
import Hapi from '@hapi/hapi';
import type { Boom } from '@hapi/boom';
import type { TLSSocket } from 'node:tls';
import type { IncomingMessage } from 'node:http';
import { createHash } from 'node:crypto';
import type Logger from 'bunyan';
import { ApiError, type AuthDecision, type TlsClient } from '../../sdk/index.js';
import { allowedStatus, errorBody } from './envelope.js';
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
  server.ext('onPreResponse', (request, h) => {
    const response = request.response as Boom | Hapi.ResponseObject | null;
    if (!response || !('isBoom' in response) || !response.isBoom) return h.continue;
    const { status, message, metadata } = describeError(response);
    if (status === 500) opts.log.error({ err: response, path: request.path }, 'request failed');
    return h.response(errorBody(status, message, metadata)).type('application/json').code(status);
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

/** Who a TLS client is: the certificates family decides through the `authenticate` hook; untrusted otherwise. */
export async function tlsCaller(raw: IncomingMessage, access: string, authenticate: Authenticator): Promise<Caller> {
  const socket = raw.socket as TLSSocket;
  const address = `${socket.remoteAddress ?? ''}:${socket.remotePort ?? ''}`;
  const peer = typeof socket.getPeerCertificate === 'function' ? socket.getPeerCertificate(false) : undefined;
  const der = peer && 'raw' in peer ? peer.raw : undefined;
  const client: TlsClient = {
    address,
    access,
    path: raw.url ?? '/',
    fingerprint: der ? createHash('sha256').update(der).digest('hex') : undefined,
    certificate: der ? `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE-----\n` : undefined,
  };
  const decision = await authenticate(client);
  return {
    trusted: decision?.trusted ?? false,
    projects: decision?.projects,
    requestor: { username: decision?.username ?? client.fingerprint ?? '', protocol: 'tls', address },
  };
}
