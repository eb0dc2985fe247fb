/** Requests and websockets over the daemon's HTTPS listener, with or without a client certificate. */
import https from 'node:https';
import { createServer } from 'node:net';
import WebSocket from 'ws';
import { exchange, requestHeaders, type HttpResult } from './daemon.js';
import type { ClientCert } from './pki.js';

export interface TlsTarget {
  host: string;
  port: number;
}

/** A port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export async function tlsRequest(target: TlsTarget, client: ClientCert | undefined, method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<HttpResult> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return exchange(https.request({
    host: target.host, port: target.port, method, path: url, agent: false, rejectUnauthorized: false,
    ...(client ? { cert: client.cert, key: client.key } : {}),
    headers: requestHeaders(payload, headers),
  }), payload);
}

/** Opens a websocket; resolves with the socket, or with the refusal's status and body. */
export function tlsWebsocket(target: TlsTarget, client: ClientCert | undefined, url: string): Promise<{ ws?: WebSocket; status?: number; body?: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`wss://${target.host}:${target.port}${url}`, { rejectUnauthorized: false, ...(client ? { cert: client.cert, key: client.key } : {}) });
    ws.once('open', () => resolve({ ws }));
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode, body: text }));
    });
    ws.once('error', reject);
  });
}
