/**
 * The connection a push uses to reach the target daemon (another daemon speaking the same API).
 * The caller gives the peer's certificate (PEM) as the one to trust: the connection is refused
 * unless the peer presents exactly that certificate (peers use self-signed certificates, so no CA
 * check applies); with no certificate given, the system's CAs decide. No client certificate is
 * sent: a push is authorised by the one-time secret the target handed out, as in the reference.
 */
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { Readable } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { badRequest } from '../../sdk/index.js';

export interface RemoteDaemon {
  /** `https://host:port`, no trailing slash. */
  base: string;
  certificate?: X509Certificate;
}

/** Checks the request's target and certificate: 400 for a client mistake. */
export function remoteDaemon(target: string, certificatePem: string): RemoteDaemon {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw badRequest(`The target "${target.slice(0, 200)}" is not a URL`);
  }
  if (url.protocol !== 'https:') throw badRequest(`The target must be an https:// address, not "${target.slice(0, 200)}"`);
  if (url.username || url.password || url.search || url.hash) throw badRequest('The target must be a plain https://host:port address');
  let certificate: X509Certificate | undefined;
  if (certificatePem) {
    try {
      certificate = new X509Certificate(certificatePem);
    } catch {
      throw badRequest('The certificate is not a PEM-encoded X.509 certificate');
    }
  }
  return { base: `https://${url.host}${url.pathname.replace(/\/+$/, '')}`, ...(certificate ? { certificate } : {}) };
}

export interface RemoteAnswer {
  status: number;
  json: any;
}

/** One request; a body stream is piped as is. Rejects when the peer's certificate is not the pinned one. */
export function remoteRequest(
  remote: RemoteDaemon, method: string, path: string, body?: Readable | string, headers: Record<string, string> = {}, signal?: AbortSignal,
): Promise<RemoteAnswer> {
  return new Promise((resolve, reject) => {
    const pinned = remote.certificate;
    const streamed = body !== undefined && typeof body !== 'string';
    const req = https.request(`${remote.base}${path}`, {
      method, headers: streamed ? { ...headers, Expect: '100-continue' } : headers, agent: false, signal,
      // A pinned certificate replaces the CA check: it is compared once the handshake is done.
      rejectUnauthorized: !pinned,
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: any;
        try {
          json = JSON.parse(text);
        } catch {
          return reject(new Error(`The target answered ${res.statusCode} with something other than JSON`));
        }
        resolve({ status: res.statusCode ?? 0, json });
      });
    });
    let answered = false;
    req.on('response', () => (answered = true));
    // A peer that refuses an upload answers before reading it and closes: the answer is what counts.
    req.on('error', (err) => {
      if (!answered) reject(new Error(`The connection to the target ${remote.base} failed: ${err.message}`));
    });
    if (pinned) {
      req.on('socket', (socket) => {
        (socket as TLSSocket).once('secureConnect', () => {
          const presented = (socket as TLSSocket).getPeerX509Certificate();
          if (!presented || !presented.raw.equals(pinned.raw)) {
            req.destroy(new Error('The target presented a certificate other than the one given'));
          }
        });
      });
    }
    if (body === undefined) req.end();
    else if (typeof body === 'string') req.end(body);
    else {
      // The body follows only once the peer asked for it (100 Continue): a peer that refuses (a wrong
      // secret) answers at once, and that answer is read instead of a reset connection mid-upload.
      let sending = false;
      body.on('error', (err) => req.destroy(err));
      req.on('continue', () => {
        sending = true;
        body.pipe(req);
      });
      req.on('response', () => {
        if (!sending) (body as Readable & { destroy(): void }).destroy();
      });
      req.flushHeaders();
    }
  });
}
