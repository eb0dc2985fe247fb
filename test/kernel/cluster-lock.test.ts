/**
 * ClusterControl.exclusively on a real one-member etcd (127.0.19.40): holders of one lock run one after
 * another, other locks do not wait, a caller that waits past its bound gets a 503 naming the holder, and
 * a holder that throws lets go.
 */
import test from 'ava';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Kernel } from '../../kernel/kernel.js';
import { ClusterControlRef, type ApiError, type ClusterControl } from '../../sdk/index.js';
import { hasEtcd } from '../helpers/etcd-cluster.js';
import { serialUnless } from '../helpers/needs.js';
import { distRoot, projectRoot } from '../helpers/daemon.js';

const serial = serialUnless(hasEtcd);
const root = mkdtempSync(path.join(tmpdir(), 'corral-cluster-lock-'));
let kernel: Kernel | undefined;
let cc: ClusterControl;

test.before(async () => {
  if (hasEtcd) return;
  const dataDir = path.join(root, 'a');
  mkdirSync(dataDir);
  kernel = await Kernel.start({
    dataDir, storeFile: path.join(dataDir, 'state.db'), registryFile: path.join(projectRoot, 'plugin-registry.json'),
    plugins: 'warnings', compiledRoot: distRoot, logLevel: 'fatal', serverCertificate: false,
  });
  cc = kernel.services.get(ClusterControlRef) as ClusterControl;
  await cc.bootstrap({ serverName: 'm1', address: '127.0.19.40:8443' });
});

test.after.always(async () => {
  await kernel?.stop();
  rmSync(root, { recursive: true, force: true });
});

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

serial('holders of one lock run one after another; another lock does not wait', async (t) => {
  const spans: Record<string, [number, number]> = {};
  const hold = (lock: string, who: string, ms: number) => cc.exclusively(lock, who, async () => {
    const start = Date.now();
    await pause(ms);
    spans[who] = [start, Date.now()];
    return who;
  });
  const results = await Promise.all([hold('membership', 'first', 300), hold('membership', 'second', 300), hold('other', 'elsewhere', 100)]);
  t.deepEqual(results, ['first', 'second', 'elsewhere']);
  const [a, b] = [spans.first!, spans.second!].sort((x, y) => x[0] - y[0]);
  t.true(b![0] >= a![1], `the second holder started ${b![0] - a![1]} ms after the first ended`);
  const other = spans.elsewhere!;
  t.true(other[1] <= Math.max(a![1], b![1]) - 200, 'the other lock ran alongside');
});

serial('a caller that waits past its bound is refused with a 503 naming the holder, and nothing of it runs', async (t) => {
  let release!: () => void;
  const held = cc.exclusively('membership', 'adding member m9', () => new Promise<void>((r) => { release = r; }));
  await pause(100);
  let ran = false;
  const started = Date.now();
  const err = await t.throwsAsync(cc.exclusively('membership', 'demoting member m2', async () => { ran = true; }, { waitMs: 400 })) as ApiError;
  t.is(err.status, 503);
  t.regex(err.message, /busy with another change \(adding member m9\)/);
  t.true(Date.now() - started < 2000, 'bounded');
  t.false(ran);
  release();
  await held;
  // Free again at once.
  t.is(await cc.exclusively('membership', 'later', async () => 'ran', { waitMs: 0 }), 'ran');
});

serial('a holder that throws lets go of the lock, and its error reaches the caller', async (t) => {
  await t.throwsAsync(cc.exclusively('membership', 'failing', async () => { throw new Error('step failed'); }), { message: 'step failed' });
  t.is(await cc.exclusively('membership', 'next', async () => 'ran', { waitMs: 0 }), 'ran');
});
