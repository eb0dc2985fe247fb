/**
 * Member keys of the server configuration stay in this server's data dir (what enabling or joining a
 * cluster swaps is the store), and changes another writer makes to the shared keys are applied live.
 */
import test from 'ava';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DocumentStore } from '../../kernel/store/document-store.js';
import { KeyRegistry } from '../../kernel/config/key-registry.js';
import { ServerConfigStore } from '../../kernel/config/server-config.js';

async function setup() {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-server-config-'));
  const store = await DocumentStore.open(path.join(dir, 'state.db'));
  const keys = new KeyRegistry();
  const applied: string[] = [];
  keys.register({ key: 'core.https_address', scope: 'server', type: 'string', member: true, live: true, doc: 'listen', apply: (v) => void applied.push(`addr=${v}`) });
  keys.register({ key: 'images.remote_cache_expiry', scope: 'server', type: 'string', live: true, doc: 'shared', apply: (v) => void applied.push(`expiry=${v}`) });
  const open = async () => {
    const config = new ServerConfigStore(store.namespace('kernel'), keys, dir);
    await config.load();
    return config;
  };
  return { dir, store, applied, open, done: async () => { await store.close(); rmSync(dir, { recursive: true, force: true }); } };
}

const sharedDoc = async (store: DocumentStore) => (await store.namespace('kernel').collection<{ config: Record<string, string> }>('server').get('', 'config'))?.doc.config;

test('a member key is kept in the data dir, a shared one in the store; both come back after a restart', async (t) => {
  const s = await setup();
  const config = await s.open();
  await config.replace({ 'core.https_address': '127.0.0.1:8443', 'images.remote_cache_expiry': '5' });
  t.deepEqual(await sharedDoc(s.store), { 'images.remote_cache_expiry': '5' });
  t.deepEqual(JSON.parse(readFileSync(path.join(s.dir, 'server-member.json'), 'utf8')).config, { 'core.https_address': '127.0.0.1:8443' });
  const again = await s.open();
  t.is(again.get('core.https_address'), '127.0.0.1:8443');
  t.is(again.get('images.remote_cache_expiry'), '5');
  await s.done();
});

test('a member key a former version stored with the shared ones moves to the data dir once', async (t) => {
  const s = await setup();
  await s.store.namespace('kernel').collection('server').put('', 'config', { config: { 'core.https_address': '127.0.0.1:9443', 'images.remote_cache_expiry': '7' } });
  const config = await s.open();
  t.is(config.get('core.https_address'), '127.0.0.1:9443');
  t.deepEqual(JSON.parse(readFileSync(path.join(s.dir, 'server-member.json'), 'utf8')).config, { 'core.https_address': '127.0.0.1:9443' });
  await config.replace({ 'core.https_address': '127.0.0.1:9443', 'images.remote_cache_expiry': '8' });
  t.deepEqual(await sharedDoc(s.store), { 'images.remote_cache_expiry': '8' });
  await s.done();
});

test('a change another writer makes to the shared keys is applied here and heard by listeners; the member keys stay', async (t) => {
  const s = await setup();
  const config = await s.open();
  await config.replace({ 'core.https_address': '127.0.0.1:8443', 'images.remote_cache_expiry': '5' });
  s.applied.length = 0;
  const heard: Record<string, string>[] = [];
  config.onChange((changed) => heard.push(changed));
  // What another cluster member's write looks like from here: the shared document changes under us.
  await s.store.namespace('kernel').collection('server').put('', 'config', { config: { 'images.remote_cache_expiry': '9' } });
  await new Promise((r) => setTimeout(r, 100));
  t.is(config.get('images.remote_cache_expiry'), '9');
  t.is(config.get('core.https_address'), '127.0.0.1:8443');
  t.deepEqual(s.applied, ['expiry=9']);
  t.deepEqual(heard, [{ 'images.remote_cache_expiry': '9' }]);
  // Its own writes are not applied twice.
  s.applied.length = 0;
  await config.replace({ 'core.https_address': '127.0.0.1:8443', 'images.remote_cache_expiry': '10' });
  await new Promise((r) => setTimeout(r, 100));
  t.deepEqual(s.applied, ['expiry=10']);
  await s.done();
});
