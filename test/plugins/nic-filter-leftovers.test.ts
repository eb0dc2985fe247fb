/**
 * NIC filters left by a daemon that died (their interface gone meanwhile) are taken out after the next
 * daemon opens its API: the chain of an interface that does not exist goes, and with it the table it
 * was the last user of. Real nft, a real daemon.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { nicTable } from '../../plugins/nic-devices/filtering.js';
import { NFT_PATH } from '../../sdk/lib/network/index.js';
import { startDaemon, waitFor, type Daemon } from '../helpers/daemon.js';

const dir = mkdtempSync(path.join(tmpdir(), 'corral-nic-leftovers-'));
const table = nicTable(dir);
// By its path: under npm, node_modules/.bin holds another `nft` (@vercel/nft, a file tracer).
const nft = (...args: string[]) => spawnSync(NFT_PATH, args, { encoding: 'utf8' });
let d: Daemon | undefined;

test.after.always(async () => {
  await d?.stop();
  nft('delete', 'table', 'bridge', table);
  rmSync(dir, { recursive: true, force: true });
});

test('a leftover filter of a vanished interface goes once the daemon serves, and its table with it', async (t) => {
  const script = [
    `add table bridge ${table}`,
    `add map bridge ${table} ports { type ifname : verdict; }`,
    `add chain bridge ${table} prerouting { type filter hook prerouting priority -200; policy accept; }`,
    `add rule bridge ${table} prerouting iifname vmap @ports`,
    `add chain bridge ${table} port_ghost0`,
    `add rule bridge ${table} port_ghost0 ether saddr != 00:16:3e:00:00:01 drop`,
    `add element bridge ${table} ports { "ghost0" : jump port_ghost0 }`,
  ].join('\n');
  const made = spawnSync(NFT_PATH, ['-f', '-'], { input: script, encoding: 'utf8' });
  t.is(made.status, 0, made.stderr);
  t.is(nft('list', 'table', 'bridge', table).status, 0);
  d = await startDaemon({ dir, plugins: 'edge' });
  await waitFor(() => nft('list', 'table', 'bridge', table).status !== 0, 10_000, 'the leftover table to go').catch((err: Error) => { t.log(d!.output().slice(-3000)); t.log(nft('list', 'tables').stdout); throw err; });
  t.not(nft('list', 'table', 'bridge', table).status, 0, 'the table is gone');
});
