/**
 * A table rebuilt whole (forwards, ACLs) through real nft: emptying a table that is not there runs no
 * batch (every boot without rules used to run one), while a leftover table is still dropped, and rules
 * written and removed again leave no table.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import bunyan from 'bunyan';
import { createHostTools } from '../../kernel/host-tools/host-tools.js';
import { ForwardFirewall, forwardTableName } from '../../plugins/network-forwards/firewall.js';
import type { ForwardRecord } from '../../plugins/network-forwards/forward.js';
import { NFT_PATH } from '../../sdk/lib/network/index.js';

const runs: { command?: string; args?: string[] }[] = [];
const log = bunyan.createLogger({ name: 'test', streams: [{ level: 'debug', type: 'raw', stream: { write: (r: object) => runs.push(r as never) } as never }] });
const tools = createHostTools(log);
const batches = () => runs.filter((r) => r.command === NFT_PATH && r.args?.[0] === '-f').length;
const tableThere = (name: string) => {
  try {
    execFileSync(NFT_PATH, ['list', 'table', 'inet', name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

test('an empty table known absent costs no batch; a leftover one is dropped; rules come and go whole', async (t) => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'corral-nft-replace-'));
  const name = forwardTableName(dataDir);
  t.teardown(() => {
    if (tableThere(name)) execFileSync(NFT_PATH, ['delete', 'table', 'inet', name]);
    rmSync(dataDir, { recursive: true, force: true });
  });

  // A boot with no forwards and no table: nothing applied.
  await new ForwardFirewall(tools, dataDir).apply(async () => []);
  t.is(batches(), 0);
  t.false(tableThere(name));

  // A table an earlier run left behind: the next boot with no forwards drops it.
  execFileSync(NFT_PATH, ['add', 'table', 'inet', name]);
  const firewall = new ForwardFirewall(tools, dataDir);
  await firewall.apply(async () => []);
  t.is(batches(), 1);
  t.false(tableThere(name));
  // Known absent now: asking again runs nothing, not even a list.
  const before = runs.length;
  await firewall.apply(async () => []);
  t.is(runs.length, before);

  // A forward writes the table; removing the last one drops it.
  const forward: ForwardRecord = { listen_address: '10.99.0.1', network: 'br0', description: '', config: {}, ports: [{ protocol: 'tcp', listen_port: '8080', target_address: '10.99.0.2', target_port: '80', description: '' }] };
  await firewall.apply(async () => [forward]);
  t.true(tableThere(name));
  await firewall.apply(async () => []);
  t.false(tableThere(name));
  t.is(batches(), 3);
});
