/**
 * Non-interactive init, like the reference's `init --preseed`: server config, storage pools and
 * profiles from a YAML document, applied through the daemon's own API so every check applies.
 * `auto` creates a `dir` pool named `default` and gives the default profile a root disk on it,
 * unless a pool exists already. Applying the same preseed twice changes nothing.
 */
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';

export interface Preseed {
  config?: Record<string, string>;
  storage_pools?: { name: string; driver: string; description?: string; config?: Record<string, string> }[];
  profiles?: { name: string; description?: string; config?: Record<string, string>; devices?: Record<string, Record<string, string>> }[];
}

export type ApiCall = (method: string, url: string, body?: unknown) => Promise<{ status: number; json: any }>;

export const AUTO_PRESEED: Preseed = {
  storage_pools: [{ name: 'default', driver: 'dir' }],
  profiles: [{ name: 'default', devices: { root: { type: 'disk', path: '/', pool: 'default' } } }],
};

export async function loadPreseed(source: string): Promise<Preseed | 'auto'> {
  if (source === 'auto') return 'auto';
  const text = source === '-' ? await readStdin() : await readFile(source, 'utf8');
  const doc = parse(text) ?? {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new Error('the preseed must be a YAML map');
  return asText(doc) as Preseed;
}

/**
 * YAML reads `size: 10` or `ipv6.nat: true` as a number or a boolean; the API takes config values
 * as strings only, so scalars are sent as their text (as the reference's YAML decoding does).
 */
function asText(value: unknown): unknown {
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return value.map(asText);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, asText(v)]));
  return value;
}

async function readStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return text;
}

async function must(call: Promise<{ status: number; json: any }>, what: string): Promise<any> {
  const res = await call;
  if (res.status >= 400 || res.json?.type === 'error') throw new Error(`${what}: ${res.json?.error ?? res.status}`);
  return res.json;
}

export async function applyPreseed(api: ApiCall, preseed: Preseed | 'auto'): Promise<void> {
  if (preseed === 'auto') {
    const pools = await must(api('GET', '/1.0/storage-pools'), 'listing storage pools');
    if ((pools.metadata ?? []).length > 0) return;
    preseed = AUTO_PRESEED;
  }
  if (preseed.config && Object.keys(preseed.config).length) {
    await must(api('PATCH', '/1.0', { config: preseed.config }), 'applying server config');
  }
  for (const pool of preseed.storage_pools ?? []) {
    const existing = await api('GET', `/1.0/storage-pools/${encodeURIComponent(pool.name)}`);
    if (existing.status === 404) await must(api('POST', '/1.0/storage-pools', pool), `creating storage pool ${pool.name}`);
    else await must(api('PATCH', `/1.0/storage-pools/${encodeURIComponent(pool.name)}`, { config: pool.config ?? {}, description: pool.description ?? existing.json.metadata?.description ?? '' }), `updating storage pool ${pool.name}`);
  }
  for (const profile of preseed.profiles ?? []) {
    const url = `/1.0/profiles/${encodeURIComponent(profile.name)}`;
    const existing = await api('GET', url);
    if (existing.status === 404) {
      await must(api('POST', '/1.0/profiles', profile), `creating profile ${profile.name}`);
    } else {
      const current = existing.json.metadata;
      await must(api('PUT', url, {
        description: profile.description ?? current.description,
        config: { ...current.config, ...profile.config },
        devices: { ...current.devices, ...profile.devices },
      }), `updating profile ${profile.name}`);
    }
  }
}
