/**
 * PATCH changes only what it sends: on every object with a PATCH, a one-field PATCH leaves every
 * other field as it was (description included, as the spec has it), and nothing is emptied.
 */
import test from 'ava';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { callAndWait, importImage, mustSucceed } from '../helpers/api.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { selfSigned } from '../helpers/pki.js';

const net = `hbp${process.pid % 10000}`;
const listen = '198.51.100.9';
const cert = selfSigned(mkdtempSync(path.join(tmpdir(), 'corral-certs-')), 'keeper');
let d: Daemon;
let fingerprint: string;

const must = (method: string, url: string, body?: unknown): Promise<void> => mustSucceed(d, method, url, body);

test.before(async () => {
  d = await startDaemon({ args: ['--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
  fingerprint = await importImage(d, buildBusyboxImage('gzip').unified, 'bb');
  await must('PATCH', `/1.0/images/${fingerprint}`, { properties: { os: 'busybox', extra: 'kept' }, auto_update: true });
  await must('PUT', '/1.0/images/aliases/bb', { target: fingerprint, description: 'the alias' });
  await must('POST', '/1.0/profiles', { name: 'p1', description: 'a profile', config: { 'user.a': '1' }, devices: { d1: { type: 'none' } } });
  await must('POST', '/1.0/projects', { name: 'pr1', description: 'a project', config: { 'features.profiles': 'false', 'user.a': '1' } });
  await must('POST', '/1.0/instances', { name: 'c1', description: 'an instance', source: { type: 'none' }, config: { 'user.a': '1' }, profiles: ['default', 'p1'], devices: { d2: { type: 'none' } } });
  await must('POST', '/1.0/networks', { name: net, description: 'a bridge', config: { 'ipv4.address': 'auto', 'ipv6.address': 'none', 'user.a': '1' } });
  const subnet = ((await d.request('GET', `/1.0/networks/${net}`)).json.metadata.config['ipv4.address'] as string).replace(/\.\d+\/\d+$/, '');
  await must('POST', `/1.0/networks/${net}/forwards`, { listen_address: listen, description: 'a forward', config: { target_address: `${subnet}.2` },
    ports: [{ protocol: 'tcp', listen_port: '80', target_port: '8080', target_address: `${subnet}.3` }] });
  await must('POST', '/1.0/network-acls', { name: 'acl1', description: 'an acl', config: { 'user.a': '1' }, ingress: [{ action: 'drop', protocol: 'icmp4', state: 'enabled' }] });
  await must('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'v1', description: 'a volume', config: { 'user.a': '1' } });
  await must('POST', '/1.0/storage-pools/default/volumes/custom/v1/snapshots', { name: 's1' });
  await must('PUT', '/1.0/storage-pools/default/volumes/custom/v1/snapshots/s1', { description: 'a snapshot', expires_at: '2100-01-01T00:00:00Z' });
  await must('POST', '/1.0/certificates', { type: 'client', name: 'keeper', certificate: cert.base64, restricted: true, projects: ['pr1'] });
  await must('PATCH', '/1.0', { config: { 'user.kept': 'yes' } });
});

test.after.always(async () => {
  await d?.request('DELETE', `/1.0/networks/${net}/forwards/${listen}`).catch(() => undefined);
  await d?.request('DELETE', `/1.0/networks/${net}`).catch(() => undefined);
  await stopDaemons();
});

/** Each object, the one field a PATCH sends, and how to read that field back. */
const cases = (): [string, Record<string, unknown>][] => [
  ['/1.0/instances/c1', { description: 'patched' }],
  ['/1.0/instances/c1', { config: { 'user.b': '2' } }],
  ['/1.0/profiles/p1', { description: 'patched' }],
  ['/1.0/projects/pr1', { description: 'patched' }],
  [`/1.0/networks/${net}`, { description: 'patched' }],
  [`/1.0/networks/${net}/forwards/${listen}`, { description: 'patched' }],
  ['/1.0/network-acls/acl1', { description: 'patched' }],
  ['/1.0/storage-pools/default', { description: 'patched' }],
  ['/1.0/storage-pools/default/volumes/custom/v1', { description: 'patched' }],
  ['/1.0/storage-pools/default/volumes/custom/v1/snapshots/s1', { description: 'patched' }],
  [`/1.0/images/${fingerprint}`, { public: true }],
  ['/1.0/images/aliases/bb', { description: 'patched' }],
  [`/1.0/certificates/${cert.fingerprint}`, { restricted: false }],
  [`/1.0/certificates/${cert.fingerprint}`, { name: 'renamed' }],
  ['/1.0', { config: { 'user.other': 'x' } }],
];

/** What a PATCH may change besides the fields sent: what the daemon derives or maintains itself. */
const VOLATILE = new Set(['used_by', 'status', 'last_used_at', 'updated_at', 'environment', 'expanded_config', 'expanded_devices']);

test.serial('a one-field PATCH keeps every field it did not send', async (t) => {
  for (const [url, patch] of cases()) {
    const before = (await d.request('GET', url)).json.metadata;
    const res = await d.request('PATCH', url, patch);
    t.is(res.status, 200, `PATCH ${url} ${JSON.stringify(patch)}: ${res.body}`);
    const after = (await d.request('GET', url)).json.metadata;
    for (const [field, value] of Object.entries(before)) {
      if (VOLATILE.has(field)) continue;
      const sent = (patch as Record<string, unknown>)[field];
      if (sent === undefined) t.deepEqual(after[field], value, `PATCH ${url} ${JSON.stringify(patch)} changed "${field}"`);
      else if (typeof sent === 'object' && sent !== null) t.deepEqual(after[field], { ...(value as object), ...sent }, `PATCH ${url} merges "${field}"`);
      else t.deepEqual(after[field], sent, `PATCH ${url} set "${field}"`);
    }
  }
});
