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

/** Upload an image tarball, give it `alias`, and answer its fingerprint; throws when the import fails. */
export async function importImage(daemon: Daemon, tarball: string, alias: string): Promise<string> {
  const { op } = await callAndWait(daemon, 'POST', '/1.0/images', readFileSync(tarball), { 'content-type': 'application/octet-stream' });
  if (op?.status !== 'Success') throw new Error(`image import failed: ${op?.err}`);
  await daemon.request('POST', '/1.0/images/aliases', { name: alias, target: op.metadata.fingerprint });
  return op.metadata.fingerprint;
}
