import test from 'ava';
import os from 'node:os';
import { startTestKernel } from '../../sdk/testing/index.js';
import { EXTENSION_CATALOG } from '../../sdk/index.js';

test('GET / lists the API versions and GET /1.0 describes the server', async (t) => {
  const k = await startTestKernel({ plugins: 'full' });
  const root = await k.inject({ url: '/' });
  t.deepEqual(root.json, { type: 'sync', status: 'Success', status_code: 200, operation: '', error_code: 0, error: '', metadata: ['/1.0'] });
  const info = await k.inject({ url: '/1.0' });
  const md = info.json.metadata;
  t.is(md.api_version, '1.0');
  t.is(md.api_status, 'stable');
  t.is(md.auth, 'trusted');
  t.false(md.public);
  t.deepEqual(md.config, {});
  const env = md.environment;
  t.is(env.kernel, os.type());
  t.is(env.kernel_version, os.release());
  t.is(env.kernel_architecture, os.machine());
  t.true(env.architectures.includes(os.machine()));
  t.is(env.server_pid, process.pid);
  t.is(env.server_name, os.hostname());
  t.is(env.server_clustered, false);
  t.is(env.project, 'default');
  // The full set names QEMU beside liblxc when QEMU is installed: "lxc | qemu", versions alike.
  t.regex(env.driver, /^lxc( \| qemu)?$/, 'the liblxc driver is operational');
  t.is(env.driver_version.split(' | ').length, env.driver.split(' | ').length);
  t.true(env.storage_supported_drivers.some((d: any) => d.Name === 'dir'));
  t.true(['nftables', 'xtables'].includes(env.firewall));
  t.regex(env.os_name, /\w/);
  for (const feature of ['idmapped_mounts', 'netnsid_getifaddrs', 'seccomp_listener', 'shiftfs', 'uevent_injection', 'unpriv_fscaps']) {
    t.true(['true', 'false'].includes(env.kernel_features[feature]), feature);
  }
  await k.stop();
  const bare = await startTestKernel({ plugins: 'warnings' });
  const bareEnv = (await bare.inject({ url: '/1.0' })).json.metadata.environment;
  t.is(bareEnv.driver, '', 'no instance driver in a build without one');
  t.deepEqual(bareEnv.storage_supported_drivers, []);
  await bare.stop();
});

test('api_extensions holds the claims of enabled plugins only, in catalog order', async (t) => {
  const edge = await startTestKernel({ plugins: 'edge' });
  const full = await startTestKernel({ plugins: 'full' });
  const edgeNames: string[] = (await edge.inject({ url: '/1.0' })).json.metadata.api_extensions;
  const fullNames: string[] = (await full.inject({ url: '/1.0' })).json.metadata.api_extensions;
  for (const names of [edgeNames, fullNames]) {
    const positions = names.map((n) => EXTENSION_CATALOG.indexOf(n));
    t.false(positions.includes(-1));
    t.deepEqual(positions, [...positions].sort((a, b) => a - b));
    t.is(new Set(names).size, names.length);
  }
  for (const kernelName of ['etag', 'patch', 'api_os', 'event_lifecycle', 'operation_description']) t.true(edgeNames.includes(kernelName), kernelName);
  t.true(fullNames.includes('resources'));
  t.false(edgeNames.includes('resources'), 'a disabled plugin leaves no extension name');
  t.is((await edge.inject({ url: '/1.0/resources' })).statusCode, 404, 'and no routes');
  await edge.stop();
  await full.stop();
});

test('PUT and PATCH /1.0 validate keys through the registry, store them and honour If-Match', async (t) => {
  const k = await startTestKernel({ plugins: 'edge' });
  const first = await k.inject({ url: '/1.0' });
  const etag = first.headers.etag as string;
  t.regex(etag, /^"[0-9a-f]{64}"$/);
  const unknown = await k.inject({ method: 'PUT', url: '/1.0', payload: { config: { 'core.bogus': '1' } } });
  t.is(unknown.statusCode, 400);
  t.regex(unknown.json.error, /core\.bogus/);
  const invalid = await k.inject({ method: 'PATCH', url: '/1.0', payload: { config: { 'core.https_address': 'nonsense:99999' } } });
  t.is(invalid.statusCode, 400);
  t.regex(invalid.json.error, /core\.https_address/);
  for (const value of [{ a: 1 }, 5, true, [1]]) {
    const wrongType = await k.inject({ method: 'PATCH', url: '/1.0', payload: { config: { 'user.x': value } } });
    t.is(wrongType.statusCode, 400, JSON.stringify(value));
    t.regex(wrongType.json.error, /user\.x/);
  }

  t.is((await k.inject({ method: 'PATCH', url: '/1.0', headers: { 'if-match': etag }, payload: { config: { 'user.a': '1', 'user.n': '5' } } })).statusCode, 200);
  t.is((await k.inject({ method: 'PATCH', url: '/1.0', headers: { 'if-match': etag }, payload: { config: { 'user.b': '2' } } })).statusCode, 412);
  t.is((await k.inject({ method: 'PATCH', url: '/1.0', payload: { config: { 'user.b': '2' } } })).statusCode, 200);
  t.deepEqual((await k.inject({ url: '/1.0' })).json.metadata.config, { 'user.a': '1', 'user.n': '5', 'user.b': '2' });
  t.is((await k.inject({ url: '/1.0?project=other' })).json.metadata.environment.project, 'other');
  t.is((await k.inject({ method: 'PATCH', url: '/1.0', payload: { config: { 'user.n': null } } })).statusCode, 200);
  t.deepEqual((await k.inject({ url: '/1.0' })).json.metadata.config, { 'user.a': '1', 'user.b': '2' }, 'null unsets');
  t.is((await k.inject({ method: 'PUT', url: '/1.0', payload: { config: { 'user.b': '3' } } })).statusCode, 200);
  t.deepEqual((await k.inject({ url: '/1.0' })).json.metadata.config, { 'user.b': '3' }, 'PUT replaces the whole config');
  t.is((await k.inject({ method: 'PUT', url: '/1.0', payload: {} })).statusCode, 200);
  t.deepEqual((await k.inject({ url: '/1.0' })).json.metadata.config, {});
  await k.stop();
});
