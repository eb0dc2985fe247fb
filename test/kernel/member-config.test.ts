/**
 * Member keys (`member: true`: listen addresses) live in the data dir, not in the store a cluster shares;
 * a value stored before that moves to the file once.
 */
import test from 'ava';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon } from '../helpers/daemon.js';
import { DocumentStore } from '../../kernel/store/document-store.js';

async function withShared<R>(dir: string, fn: (config: { get(): Promise<Record<string, string>>; set(c: Record<string, string>): Promise<void> }) => Promise<R>): Promise<R> {
  const store = await DocumentStore.open(path.join(dir, 'corral.db'));
  const docs = store.namespace('kernel').collection<{ config: Record<string, string> }>('server');
  try {
    return await fn({
      get: async () => (await docs.get('', 'config'))?.doc.config ?? {},
      set: async (config) => void (await docs.put('', 'config', { config })),
    });
  } finally {
    await store.close();
  }
}

const memberFile = (dir: string) => JSON.parse(readFileSync(path.join(dir, 'member-config.json'), 'utf8')).config;

test('core.https_address is kept in member-config.json, cluster keys in the store; an old stored address moves to the file', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-member-config-'));
  try {
    let d = await startDaemon({ dir });
    const put = await d.request('PUT', '/1.0', { config: { 'core.https_address': '127.0.19.65:18443', 'cluster.max_voters': '5' } });
    t.is(put.status, 200, put.body);
    await d.stop();
    t.deepEqual(memberFile(dir), { 'core.https_address': '127.0.19.65:18443' });
    await withShared(dir, async (shared) => {
      t.deepEqual(await shared.get(), { 'cluster.max_voters': '5' });
      // As a daemon before member keys kept it: the address in the shared document, no file.
      await shared.set({ 'cluster.max_voters': '5', 'core.https_address': '127.0.19.66:18443' });
    });
    rmSync(path.join(dir, 'member-config.json'));

    d = await startDaemon({ dir });
    const config = (await d.request('GET', '/1.0')).json.metadata.config;
    t.is(config['core.https_address'], '127.0.19.66:18443');
    t.is(config['cluster.max_voters'], '5');
    t.deepEqual((await d.request('GET', '/1.0')).json.metadata.environment.addresses, ['127.0.19.66:18443'], 'listening on it');
    await d.stop();
    t.deepEqual(memberFile(dir), { 'core.https_address': '127.0.19.66:18443' });
    t.deepEqual(await withShared(dir, (shared) => shared.get()), { 'cluster.max_voters': '5' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
