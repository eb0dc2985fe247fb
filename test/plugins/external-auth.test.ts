/**
 * The external identity (candid.*) and RBAC (rbac.*) server keys through the API of a real daemon
 * and through lxc: good values stored, bad ones refused with 400 and nothing changed, the two
 * services exclusive, an http:// identity service only with its public key.
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { lxc } from '../helpers/clients.js';

let d: Daemon;
const key = () => randomBytes(32).toString('base64');

const config = async (): Promise<Record<string, string>> => (await d.request('GET', '/1.0')).json.metadata.config;
const patch = (values: Record<string, string>) => d.request('PATCH', '/1.0', { config: values });
const identityKeys = (c: Record<string, string>) => Object.fromEntries(Object.entries(c).filter(([k]) => /^(candid|rbac)\./.test(k)));

test.before(async () => {
  d = await startDaemon({ plugins: 'full' });
});

test.after.always(async () => {
  await stopDaemons();
});

test.afterEach.always(async () => {
  // Back to no identity keys, whatever a test left.
  const c = await config();
  await d.request('PUT', '/1.0', { config: Object.fromEntries(Object.entries(c).filter(([k]) => !/^(candid|rbac)\./.test(k))) });
});

test.serial('candid.* values are accepted, shown as written, and unset again', async (t) => {
  const values = { 'candid.api.url': 'https://idp.example.com:8081/', 'candid.api.key': key(), 'candid.domains': 'example.com,staff.example.org', 'candid.expiry': '7200' };
  const res = await patch(values);
  t.is(res.status, 200, res.body);
  t.deepEqual(identityKeys(await config()), values);
  t.is((await d.request('PUT', '/1.0', { config: {} })).status, 200);
  t.deepEqual(identityKeys(await config()), {});
});

test.serial('bad values are refused with 400 naming the problem, and nothing is stored', async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ 'candid.api.url': 'not a url' }, /not a URL/],
    [{ 'candid.api.url': 'ftp://idp.example.com' }, /http or https/],
    [{ 'candid.expiry': 'abc' }, /expiry/],
    [{ 'candid.expiry': '0' }, /expiry/],
    [{ 'candid.api.key': 'k' }, /base64|32 bytes/],
    [{ 'candid.api.key': randomBytes(16).toString('base64') }, /32 bytes/],
    [{ 'candid.domains': 'example.com,bad domain' }, /Invalid domain "bad domain"/],
    [{ 'rbac.api.url': '::bad' }, /not a URL/],
    [{ 'rbac.agent.url': 'x' }, /not a URL/],
    [{ 'rbac.expiry': '-5' }, /expiry/],
    [{ 'rbac.api.expiry': 'soon' }, /expiry/],
    [{ 'rbac.agent.public_key': 'k' }, /base64|32 bytes/],
    [{ 'rbac.agent.username': 'two words' }, /username/],
    [{ 'candid.unknown': '1' }, /candid\.unknown/],
  ];
  for (const [values, message] of cases) {
    const res = await patch(values);
    t.is(res.status, 400, `${JSON.stringify(values)}: ${res.body}`);
    t.is(res.json.error_code, 400);
    t.regex(res.json.error, message, JSON.stringify(values));
  }
  t.deepEqual(identityKeys(await config()), {});
});

test.serial('rbac.* values are accepted; the identity service and RBAC exclude each other', async (t) => {
  const rbac = {
    'rbac.api.url': 'https://rbac.example.com', 'rbac.api.key': key(), 'rbac.expiry': '600', 'rbac.agent.url': 'https://rbac.example.com/agent',
    'rbac.agent.username': 'corral-agent', 'rbac.agent.private_key': key(), 'rbac.agent.public_key': key(),
  };
  t.is((await patch(rbac)).status, 200);
  t.deepEqual(identityKeys(await config()), rbac);
  const both = await patch({ 'candid.api.url': 'https://idp.example.com' });
  t.is(both.status, 400);
  t.regex(both.json.error, /cannot be used together/);
  t.deepEqual(identityKeys(await config()), rbac, 'the refused change left everything as it was');
});

test.serial('an http:// identity service needs its public key', async (t) => {
  const bare = await patch({ 'candid.api.url': 'http://idp.internal:8081' });
  t.is(bare.status, 400);
  t.regex(bare.json.error, /candid\.api\.key/);
  const k = key();
  t.is((await patch({ 'candid.api.key': k })).status, 200);
  t.is((await patch({ 'candid.api.url': 'http://idp.internal:8081' })).status, 200);
  t.deepEqual(identityKeys(await config()), { 'candid.api.key': k, 'candid.api.url': 'http://idp.internal:8081' });
});

test.serial('the stored keys survive a restart whatever their stored order', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-extauth-'));
  try {
    let daemon = await startDaemon({ plugins: 'full', dir });
    // Stored as {url, key}: at boot the http:// URL is applied before the key that allows it.
    t.is((await daemon.request('PUT', '/1.0', { config: { 'candid.api.url': 'https://idp.internal' } })).status, 200);
    t.is((await daemon.request('PATCH', '/1.0', { config: { 'candid.api.key': key() } })).status, 200);
    t.is((await daemon.request('PATCH', '/1.0', { config: { 'candid.api.url': 'http://idp.internal' } })).status, 200);
    const before = (await daemon.request('GET', '/1.0')).json.metadata.config;
    t.deepEqual(Object.keys(identityKeys(before)), ['candid.api.url', 'candid.api.key']);
    await daemon.stop();
    daemon = await startDaemon({ plugins: 'full', dir });
    t.deepEqual(identityKeys((await daemon.request('GET', '/1.0')).json.metadata.config), identityKeys(before));
    await daemon.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test.serial('lxc config set checks the keys too', async (t) => {
  const good = await lxc(d.socket, 'config', 'set', 'candid.api.url', 'https://login.example.com');
  t.is(good.status, 0, good.stderr);
  t.is((await lxc(d.socket, 'config', 'get', 'candid.api.url')).stdout.trim(), 'https://login.example.com');
  const bad = await lxc(d.socket, 'config', 'set', 'candid.expiry', 'tomorrow');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /expiry/);
  const exclusive = await lxc(d.socket, 'config', 'set', 'rbac.api.url', 'https://rbac.example.com');
  t.not(exclusive.status, 0);
  t.regex(exclusive.stderr, /cannot be used together/);
});
