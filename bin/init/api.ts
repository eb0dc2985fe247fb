/**
 * The daemon's API as init sees it: one call shape over the unix socket (`corrald init`) or the
 * kernel's in-process inject (`corrald --init`), so both go through every check the API makes.
 */
import http from 'node:http';

export interface ApiResult { status: number; json: any }
export type ApiCall = (method: string, url: string, body?: unknown) => Promise<ApiResult>;

/** The error an API call answered with, in words an operator can act on. */
export class InitError extends Error {}

/** Calls the daemon listening on `socketPath`. */
export function socketApi(socketPath: string): ApiCall {
  return (method, url, body) => new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request({ socketPath, method, path: url, headers: payload === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: parseJson(Buffer.concat(chunks).toString('utf8')) }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => reject(new InitError(
      err.code === 'ENOENT' || err.code === 'ECONNREFUSED' ? `no daemon answers on ${socketPath} (is corrald running with this --dir?)` : `talking to ${socketPath}: ${err.message}`)));
    req.end(payload);
  });
}

/** Calls through an in-process inject function (the kernel's). */
export function injectApi(inject: (opts: { method: string; url: string; payload?: string; headers: Record<string, string> }) => Promise<{ statusCode: number; payload: string }>): ApiCall {
  return async (method, url, body) => {
    const res = await inject({ method, url, payload: body === undefined ? undefined : JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    return { status: res.statusCode, json: parseJson(res.payload) };
  };
}

function parseJson(text: string): any {
  try { return JSON.parse(text); } catch { return undefined; }
}

/**
 * The metadata of a successful call; a failure becomes an InitError saying what was being done.
 * A background operation is waited for, so "done" means done.
 */
export async function must(api: ApiCall, method: string, url: string, body: unknown, doing: string): Promise<any> {
  const res = await api(method, url, body);
  if (res.status >= 400 || res.json?.type === 'error') throw new InitError(`${doing}: ${res.json?.error || `status ${res.status}`}`);
  if (res.json?.type !== 'async') return res.json?.metadata;
  const op = await api('GET', `${res.json.operation}/wait`);
  const meta = op.json?.metadata;
  if (op.status >= 400 || meta?.status_code !== 200) throw new InitError(`${doing}: ${meta?.err || op.json?.error || 'the operation failed'}`);
  return meta;
}

/** The metadata of a GET, or undefined when the object does not exist. */
export async function find(api: ApiCall, url: string, doing: string): Promise<any | undefined> {
  const res = await api('GET', url);
  if (res.status === 404) return undefined;
  if (res.status >= 400 || res.json?.type === 'error') throw new InitError(`${doing}: ${res.json?.error || `status ${res.status}`}`);
  return res.json?.metadata;
}

export const inProject = (url: string, project: string | undefined) =>
  project && project !== 'default' ? `${url}${url.includes('?') ? '&' : '?'}project=${encodeURIComponent(project)}` : url;
