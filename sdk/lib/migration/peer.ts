/**
 * The other end of a migration, whatever is migrated: the operation to connect to (the source's in
 * pull mode, the target's in push mode), the certificate that server must present, and the websocket
 * secrets its client handed over. This end presents its own server certificate and trusts only the
 * given one, pinned by fingerprint whatever the host name it is reached by.
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { PeerCertificate } from 'node:tls';
import type { ClientOptions } from 'ws';
import { badRequest } from '../../errors.js';
import { MigrationChannel } from './channel.js';

const CONNECT_TIMEOUT_MS = 10_000;

export interface MigrationPeer {
  /** https URL of the peer's operation. */
  operation: URL;
  certificate: string;
  secrets: { control: string; fs: string };
  /** What the peer is to this end ("migration source" or "migration target"), for messages. */
  role: string;
}

export interface PeerLink {
  control: MigrationChannel;
  fs: MigrationChannel;
  close(): void;
}

const text = (v: unknown): v is string => typeof v === 'string' && v !== '';

/**
 * Checks what a client says about the peer (`what` names it in errors: "migration source" or
 * "migration target"); a bad field is the client's mistake, answered before anything starts.
 */
export function parsePeer(fields: Record<string, unknown>, what: string): MigrationPeer {
  if (!text(fields.operation)) throw badRequest(`A ${what} needs "operation" (the URL of the peer's migration operation)`);
  let operation: URL;
  try {
    operation = new URL(fields.operation);
  } catch {
    throw badRequest(`Invalid migration operation URL "${fields.operation}"`);
  }
  if (operation.protocol !== 'https:' || !/^\/1\.0\/operations\/[^/]+$/.test(operation.pathname)) {
    throw badRequest('The migration operation must be an https URL of the form https://<host>/1.0/operations/<id>');
  }
  if (!text(fields.certificate) || !fields.certificate.includes('BEGIN CERTIFICATE')) throw badRequest(`A ${what} needs the peer server's "certificate" (PEM)`);
  try {
    new X509Certificate(fields.certificate);
  } catch {
    throw badRequest(`The ${what}'s "certificate" is not a valid PEM certificate`);
  }
  const secrets = fields.secrets as Record<string, unknown> | undefined;
  if (!secrets || typeof secrets !== 'object' || !text(secrets.control) || !text(secrets.fs)) {
    throw badRequest(`A ${what} needs "secrets" with the "control" and "fs" websocket secrets`);
  }
  return { operation, certificate: fields.certificate, secrets: { control: secrets.control, fs: secrets.fs }, role: what };
}

/** Accept the peer only by the given certificate's fingerprint (tls's checkServerIdentity contract). */
const pinned = (expected: string, role: string) => (_host: string, cert: PeerCertificate): Error | undefined =>
  cert.fingerprint256 === expected ? undefined : new Error(`the ${role} presented another certificate than the one given`);

async function open(url: URL, secret: string, label: string, role: string, tls: { cert: string; key: string; ca: string }, signal: AbortSignal): Promise<MigrationChannel> {
  // Loaded on the first migration: a daemon that never migrates does not carry ws's client at start.
  const { WebSocket } = await import('ws');
  const wsUrl = new URL(`${url.pathname}/websocket`, url);
  wsUrl.protocol = 'wss:';
  wsUrl.searchParams.set('secret', secret);
  const expected = new X509Certificate(tls.ca).fingerprint256;
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(wsUrl, {
      cert: tls.cert, key: tls.key, ca: [tls.ca], handshakeTimeout: CONNECT_TIMEOUT_MS,
      checkServerIdentity: pinned(expected, role),
      // ws hands these to https.request; its typing of checkServerIdentity predates tls's.
    } as unknown as ClientOptions);
    const fail = (err: Error) => {
      socket.terminate();
      reject(new Error(`Cannot reach the ${role} at ${url.host}: ${err.message}`));
    };
    socket.once('open', () => {
      socket.off('error', fail);
      // Read from the first frame on: a peer may speak before the other socket is open.
      resolve(new MigrationChannel(socket, label));
    });
    socket.once('error', fail);
    socket.once('unexpected-response', (_req, res) => fail(new Error(`the ${role} answered ${res.statusCode}`)));
    signal.addEventListener('abort', () => fail(new Error('cancelled')), { once: true });
  });
}

/** Open control, then fs (the order the reference's peers use), as this server (`dataDir` holds its certificate). */
export async function connectPeer(dataDir: string, peer: MigrationPeer, signal: AbortSignal): Promise<PeerLink> {
  const [cert, key] = await Promise.all([readFile(path.join(dataDir, 'server.crt'), 'utf8'), readFile(path.join(dataDir, 'server.key'), 'utf8')]);
  const tls = { cert, key, ca: peer.certificate };
  const control = await open(peer.operation, peer.secrets.control, 'control', peer.role, tls, signal);
  let fs: MigrationChannel;
  try {
    fs = await open(peer.operation, peer.secrets.fs, 'fs', peer.role, tls, signal);
  } catch (err) {
    control.close();
    throw err;
  }
  return { control, fs, close: () => { control.close(); fs.close(); } };
}
