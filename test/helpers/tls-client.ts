/** Requests and websockets over the daemon's HTTPS listener, with or without a client certificate. */
import https from 'node:https';
import { createServer } from 'node:net';
import WebSocket from 'ws';
import type { HttpResult } from './daemon.js';
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

export function tlsRequest(target: TlsTarget, client: ClientCert | undefined, method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request({
      host: target.host, port: target.port, method, path: url, agent: false, rejectUnauthorized: false,
      ...(client ? { cert: client.cert, key: client.key } : {}),
      headers: { ...(payload !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, json });
      });
    });
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
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
