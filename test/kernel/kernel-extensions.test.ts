/** Each api_extensions name the kernel claims, exercised: a table from name to the check that proves it. */
import test from 'ava';
import path from 'node:path';
import { startTestKernel, type TestKernel } from '../../sdk/testing/index.js';
import { readRegistry } from '../../kernel/loader/plugin-set.js';
import type { EventEnvelope } from '../../sdk/index.js';
import { projectRoot } from '../helpers/daemon.js';

type Check = (k: TestKernel, events: EventEnvelope[]) => Promise<boolean>;

const env = async (k: TestKernel) => (await k.inject({ url: '/1.0' })).json.metadata.environment;
const probeJob = async (k: TestKernel) => {
  await k.inject({ method: 'POST', url: '/1.0/probes', payload: { name: 'x', config: { 'user.tier': 'gold' } } });
  const op = await k.inject({ method: 'POST', url: '/1.0/probes/x/jobs', payload: { ms: 0 } });
  return (await k.inject({ url: `${op.headers.location}/wait` })).json.metadata;
};

const checks: Record<string, Check> = {
  etag: async (k) => /^"[0-9a-f]{64}"$/.test(String((await k.inject({ url: '/1.0' })).headers.etag))
    && (await k.inject({ method: 'PUT', url: '/1.0', headers: { 'if-match': '"stale"' }, payload: { config: {} } })).statusCode === 412,
  patch: async (k) => (await k.inject({ method: 'PATCH', url: '/1.0', payload: { config: { 'user.p': '1' } } })).statusCode === 200
    && (await k.inject({ url: '/1.0' })).json.metadata.config['user.p'] === '1',
  operation_description: async (k) => (await probeJob(k)).description === 'Running probe job',
  event_lifecycle: async (k, events) => {
    await k.inject({ method: 'PATCH', url: '/1.0', payload: { config: { 'user.e': '1' } } });
    return events.some((e) => e.type === 'lifecycle' && (e.metadata as { action: string }).action === 'config-updated');
  },
  event_location: async (k, events) => {
    await k.inject({ method: 'PATCH', url: '/1.0', payload: { config: { 'user.l': '1' } } });
    return events.length > 0 && events.every((e) => e.location === 'none');
  },
  event_lifecycle_requestor_address: async (k, events) => {
    await k.inject({ method: 'PATCH', url: '/1.0', payload: { config: { 'user.r': '1' } } });
    const requestor = (events.find((e) => e.type === 'lifecycle')?.metadata as { requestor: Record<string, string> }).requestor;
    return requestor.protocol === 'unix' && typeof requestor.address === 'string' && requestor.address.length > 0;
  },
  event_project: async (k, events) => {
    await k.inject({ method: 'POST', url: '/1.0/probes?project=elsewhere', payload: { name: 'p' } });
    return events.some((e) => e.project === 'elsewhere');
  },
  https_allowed_credentials: async (k) => {
    await k.inject({ method: 'PATCH', url: '/1.0', payload: { config: { 'core.https_allowed_credentials': 'true' } } });
    const on = (await k.inject({ url: '/' })).headers['access-control-allow-credentials'] === 'true';
    await k.inject({ method: 'PATCH', url: '/1.0', payload: { config: { 'core.https_allowed_credentials': 'false' } } });
    return on && (await k.inject({ url: '/' })).headers['access-control-allow-credentials'] === undefined;
  },
  // The PROXY header itself is read on real connections in test/plugins/certificates.test.ts.
  server_trusted_proxy: async (k) => (await k.inject({ method: 'PATCH', url: '/1.0', payload: { config: { 'core.https_trusted_proxy': '127.0.0.1, ::1' } } })).statusCode === 200
    && (await k.inject({ method: 'PATCH', url: '/1.0', payload: { config: { 'core.https_trusted_proxy': 'proxy.example' } } })).statusCode === 400,
  api_os: async (k) => { const e = await env(k); return typeof e.os_name === 'string' && e.os_name !== '' && typeof e.os_version === 'string'; },
  kernel_features: async (k) => Object.values((await env(k)).kernel_features).every((v) => v === 'true' || v === 'false'),
  firewall_driver: async (k) => ['nftables', 'xtables'].includes((await env(k)).firewall),
  api_filtering: async (k) => {
    await probeJob(k);
    const r = await k.inject({ url: `/1.0/probes?filter=${encodeURIComponent('config.user.tier eq gold')}` });
    const none = await k.inject({ url: `/1.0/probes?filter=${encodeURIComponent('config.user.tier ne gold')}` });
    return r.json.metadata.length === 1 && none.json.metadata.length === 0;
  },
};

const kernelClaims = readRegistry(path.join(projectRoot, 'plugin-registry.json')).kernel?.provides?.extensions ?? [];

const fixtureRegistry = path.join(projectRoot, 'test', 'fixtures', 'registry.json');

test('every kernel claim has a check, and every check is a claim', (t) => {
  t.deepEqual([...kernelClaims].sort(), Object.keys(checks).sort());
  t.deepEqual(readRegistry(fixtureRegistry).kernel?.provides?.extensions, kernelClaims, 'the fixture registry claims what the real one does');
});

for (const name of Object.keys(checks)) {
  test(`kernel extension ${name} works`, async (t) => {
    const k = await startTestKernel({ plugins: 'test', registry: fixtureRegistry });
    const events: EventEnvelope[] = [];
    k.kernel.events.subscribe((e) => events.push(e));
    try {
      t.true(await checks[name]!(k, events), name);
      t.true((await k.inject({ url: '/1.0' })).json.metadata.api_extensions.includes(name), `${name} is advertised`);
    } finally {
      await k.stop();
    }
  });
}
