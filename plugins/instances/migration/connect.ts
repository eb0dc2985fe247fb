/**
 * The target reaching the source's operation websockets over TLS: it presents this server's own
 * certificate as its client certificate, and trusts only the certificate the client handed over for
 * the source (pinned by fingerprint, whatever the host name).
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { PeerCertificate } from 'node:tls';
import { WebSocket, type ClientOptions } from 'ws';
import { MigrationChannel } from '../../../sdk/lib/migration/index.js';
import type { PullSource } from './pull-source.js';

const CONNECT_TIMEOUT_MS = 10_000;

export interface SourceLink {
  control: MigrationChannel;
  fs: MigrationChannel;
  close(): void;
}

/** Accept the peer only by the given certificate's fingerprint (tls's checkServerIdentity contract). */
const pinned = (expected: string) => (_host: string, cert: PeerCertificate): Error | undefined =>
  cert.fingerprint256 === expected ? undefined : new Error('The source presented another certificate than the one given');

function open(url: URL, secret: string, label: string, tls: { cert: string; key: string; ca: string }, signal: AbortSignal): Promise<MigrationChannel> {
  const wsUrl = new URL(`${url.pathname}/websocket`, url);
  wsUrl.protocol = 'wss:';
  wsUrl.searchParams.set('secret', secret);
  const expected = new X509Certificate(tls.ca).fingerprint256;
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(wsUrl, {
      cert: tls.cert, key: tls.key, ca: [tls.ca], handshakeTimeout: CONNECT_TIMEOUT_MS,
      // The chain is the pinned certificate itself; the host name it was reached by does not matter.
      checkServerIdentity: pinned(expected),
      // ws passes these to https.request; its own typing of checkServerIdentity predates tls's.
    } as unknown as ClientOptions);
    const fail = (err: Error) => {
      socket.terminate();
      reject(new Error(`Cannot reach the migration source at ${url.host}: ${err.message}`));
    };
    socket.once('open', () => {
      socket.off('error', fail);
      // Read from the first frame on: a source may speak before the other socket is open.
      resolve(new MigrationChannel(socket, label));
    });
    socket.once('error', fail);
    socket.once('unexpected-response', (_req, res) => fail(new Error(`the source answered ${res.statusCode}`)));
    signal.addEventListener('abort', () => fail(new Error('cancelled')), { once: true });
  });
}

export async function connectSource(dataDir: string, source: PullSource, signal: AbortSignal): Promise<SourceLink> {
  const [cert, key] = await Promise.all([readFile(path.join(dataDir, 'server.crt'), 'utf8'), readFile(path.join(dataDir, 'server.key'), 'utf8')]);
  const tls = { cert, key, ca: source.certificate };
  // Control first, then fs: the order the source's peers open them in.
  const control = await open(source.operation, source.secrets.control, 'control', tls, signal);
  let fs: MigrationChannel;
  try {
    fs = await open(source.operation, source.secrets.fs, 'fs', tls, signal);
  } catch (err) {
    control.close();
    throw err;
  }
  return { control, fs, close: () => { control.close(); fs.close(); } };
}
