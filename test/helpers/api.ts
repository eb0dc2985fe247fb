import http from 'node:http';
/** API calls the plugin tests share: a request that waits for its operation, and importing an image under an alias. */
import { readFileSync } from 'node:fs';
import type { Daemon, HttpResult } from './daemon.js';

export interface CallResult extends Omit<HttpResult, 'headers'> {
  /** Loose, as tests read them (an ETag is sent back as it came). */
  headers: Record<string, any>;
  /** The finished operation, when the answer was one. */
  op?: any;
}

export async function callAndWait(daemon: Daemon, method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<CallResult> {
  const res = await daemon.request(method, url, body, headers);
  if (res.json?.type !== 'async') return res;
  const op = await daemon.request('GET', `${res.json.operation}/wait?timeout=60`);
  return { ...res, op: op.json.metadata };
}

/** A setup call that must work: throws with the daemon's answer when the request or its operation fails. */
export async function mustSucceed(daemon: Daemon, method: string, url: string, body?: unknown): Promise<void> {
  const res = await callAndWait(daemon, method, url, body);
  if (res.status >= 400 || (res.op && res.op.status !== 'Success')) throw new Error(`${method} ${url}: ${res.body} ${res.op?.err ?? ''}`);
}

/** Upload an image tarball, give it `alias`, and answer its fingerprint; throws when the import fails. */
export async function importImage(daemon: Daemon, tarball: string, alias: string): Promise<string> {
  const { op, json } = await callAndWait(daemon, 'POST', '/1.0/images', readFileSync(tarball), { 'content-type': 'application/octet-stream' });
  // Refused before an operation (a 400) or failed in it.
  if (op?.status !== 'Success') throw new Error(`image import failed: ${op?.err ?? json?.error}`);
  await daemon.request('POST', '/1.0/images/aliases', { name: alias, target: op.metadata.fingerprint });
  return op.metadata.fingerprint;
}

/** A GET over the unix socket whose answer is kept as bytes (tarball downloads), whatever its status. */
export function downloadRaw(socket: string, url: string): Promise<{ status: number; body: Buffer; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: socket, method: 'GET', path: url }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A download that must answer 200: its bytes. */
export async function download(socket: string, url: string): Promise<Buffer> {
  const res = await downloadRaw(socket, url);
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${res.body}`);
  return res.body;
}

