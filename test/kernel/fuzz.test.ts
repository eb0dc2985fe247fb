/** Thousands of random and mutated requests: never a 500 for a client mistake, never a crash. */
import test from 'ava';
import path from 'node:path';
import { projectRoot, startDaemon, stopDaemons } from '../helpers/daemon.js';

test.after.always(stopDaemons);

// A small deterministic generator so a failure can be replayed.
function prng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 0x100000000;
  };
}

const PATHS = [
  '/', '/1.0', '/1.0/operations', '/1.0/operations/{uuid}', '/1.0/operations/{uuid}/wait', '/1.0/events', '/1.0/warnings',
  '/1.0/warnings/{uuid}', '/1.0/resources', '/1.0/probes', '/1.0/probes/alpha', '/1.0/probes/alpha/jobs', '/1.0/probes/{word}',
  '/1.0/probe-alias/alpha', '/1.0/operations/{uuid}/websocket', '/2.0', '/1.0/containers',
];
const METHODS = ['GET', 'PUT', 'PATCH', 'POST', 'DELETE', 'HEAD', 'OPTIONS', 'TRACE', 'PROPFIND'];
const QUERIES = ['recursion=1', 'recursion=2', 'recursion=abc', 'recursion=-4', 'recursion=99999999999999999999', 'project=default', 'project=%00', 'project=a%2Fb',
  'project=' + 'p'.repeat(300), 'target=none', 'target=x', 'filter=name%20eq%20alpha', 'filter=(((', 'filter=name%20eq', 'filter=%22', 'filter=not%20not%20name%20eq%20a',
  'timeout=abc', 'timeout=-5', 'timeout=0', 'all-projects=true', 'secret=', 'type=bogus', '%zz=1', 'recursion=1&recursion=2'];
const VALID_BODIES: unknown[] = [
  { config: { 'user.a': '1' } }, { name: 'fz', config: {}, devices: {} }, { ms: 0 }, { status: 'acknowledged' }, { description: 'x', config: { 'user.b': 'c' } },
];

function mutate(rand: () => number, value: unknown, depth = 0): unknown {
  const r = rand();
  if (depth > 3 || r < 0.1) {
    const atoms = [null, true, 0, -1, 1e308, 'x'.repeat(Math.floor(rand() * 5000)), '', '\u0000', [], {}, NaN, '../../etc/passwd', { __proto__: { polluted: 1 } }];
    return atoms[Math.floor(rand() * atoms.length)];
  }
  if (Array.isArray(value)) return value.map((v) => mutate(rand, v, depth + 1));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (rand() < 0.15) continue;
      out[rand() < 0.1 ? `${k}${Math.floor(rand() * 10)}` : k] = rand() < 0.5 ? mutate(rand, v, depth + 1) : v;
    }
    if (rand() < 0.2) out[`extra${Math.floor(rand() * 100)}`] = mutate(rand, {}, depth + 1);
    return out;
  }
  return value;
}

function body(rand: () => number): string | undefined {
  const r = rand();
  if (r < 0.15) return undefined;
  const base = VALID_BODIES[Math.floor(rand() * VALID_BODIES.length)];
  const json = JSON.stringify(r < 0.45 ? base : mutate(rand, base));
  if (r > 0.85) {
    // Corrupt the bytes themselves.
    const cut = Math.floor(rand() * json.length);
    return rand() < 0.5 ? json.slice(0, cut) : json.slice(0, cut) + String.fromCharCode(Math.floor(rand() * 256)) + json.slice(cut);
  }
  if (r > 0.8) return '['.repeat(5000) + ']'.repeat(5000);
  return json;
}

test('random and mutated requests never get a 500 and never kill the daemon', async (t) => {
  const d = await startDaemon({ plugins: 'test', args: ['--registry', path.join(projectRoot, 'test', 'fixtures', 'registry.json')] });
  await d.request('POST', '/1.0/probes', { name: 'alpha', config: { 'user.os': 'x' } });
  const rand = prng(20261122);
  const statuses = new Map<number, number>();
  const N = 3000;
  const batch = 16;
  try {
    for (let i = 0; i < N; i += batch) {
      await Promise.all(Array.from({ length: batch }, async () => {
        const method = METHODS[Math.floor(rand() * METHODS.length)]!;
        let p = PATHS[Math.floor(rand() * PATHS.length)]!
          .replace('{uuid}', rand() < 0.5 ? '00000000-0000-0000-0000-000000000000' : encodeURIComponent(String(mutate(rand, 'id'))))
          .replace('{word}', encodeURIComponent(String(mutate(rand, 'w'))).slice(0, 300));
        if (rand() < 0.05) p += '/' + 'seg'.repeat(Math.floor(rand() * 50));
        const query = Array.from({ length: Math.floor(rand() * 3) }, () => QUERIES[Math.floor(rand() * QUERIES.length)]).join('&');
        const url = query ? `${p}?${query}` : p;
        const payload = method === 'GET' || method === 'HEAD' ? undefined : body(rand);
        const headers: Record<string, string> = {};
        if (rand() < 0.1) headers['if-match'] = rand() < 0.5 ? '"nope"' : '*';
        if (rand() < 0.1) headers['content-type'] = ['text/html', 'application/xml', 'multipart/form-data', 'application/json; charset=latin1'][Math.floor(rand() * 4)]!;
        const res = await d.request(method, url, payload, headers).catch((err: Error) => {
          t.fail(`${method} ${url} ${JSON.stringify(headers)} ${payload?.slice(0, 200)}: ${err.message}`);
          return undefined;
        });
        if (!res) return;
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status >= 500) t.fail(`${method} ${url} ${payload?.slice(0, 200)} -> ${res.status} ${res.body.slice(0, 300)}`);
        if (res.status >= 400 && method !== 'HEAD') {
          t.true([400, 401, 403, 404, 409, 412].includes(res.status), `${method} ${url} -> ${res.status}`);
          if (res.json?.type !== 'error' || res.json?.error_code !== res.status) t.fail(`${method} ${url}: not an error envelope: ${res.body.slice(0, 200)}`);
        }
      }));
    }
    t.is((await d.request('GET', '/1.0')).status, 200, 'still serving');
    t.log([...statuses.entries()].sort().map(([s, n]) => `${s}: ${n}`).join(', '));
    t.true((statuses.get(200) ?? 0) > 0 && (statuses.get(400) ?? 0) > 0);
  } finally {
    t.is(d.child.exitCode, null, 'the daemon is alive');
    await d.stop();
  }
});
