/**
 * The etcd backend's in-memory copy of the documents, on a real 3-member etcd (127.0.23.1-3): a read on
 * one member right after a write acknowledged on another sees it (get and list, in a tight loop, and
 * with readers hammering while writers write), concurrent reads share one freshness check, a member
 * whose etcd dies and comes back reloads its copy and misses nothing, a request's reads share one check
 * until a peer's news arrives, and what the copy costs in memory.
 */
import test from 'ava';
import v8 from 'node:v8';
import vm from 'node:vm';
import { DocumentStore } from '../../kernel/store/document-store.js';
import { EtcdBackend } from '../../kernel/store/etcd-backend.js';
import { docKey, docPrefix, encodeValue } from '../../kernel/store/etcd-keys.js';
import { noteNews, withReadScope } from '../../kernel/store/read-scope.js';
import { hasEtcd, startEtcdCluster, type TestEtcdCluster } from '../helpers/etcd-cluster.js';
import { serialUnless } from '../helpers/needs.js';

const serial = serialUnless(hasEtcd);
let etcd: TestEtcdCluster | undefined;

if (!hasEtcd) {
  test.before(async () => {
    etcd = await startEtcdCluster(['127.0.23.1', '127.0.23.2', '127.0.23.3']);
  });
  test.after.always(async () => {
    await etcd?.stop();
  });
}

const open = async (i: number) => {
  const backend = new EtcdBackend(await etcd!.members[i]!.connect());
  return { store: await DocumentStore.over(backend), backend };
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

serial('a read on one member right after a write acknowledged on another sees it (get, list, delete)', async (t) => {
  const a = await open(0);
  const b = await open(1);
  const ca = a.store.namespace('loop').collection<{ n: number }>('docs');
  const cb = b.store.namespace('loop').collection<{ n: number }>('docs');
  // b reads x once first, so that anything kept from that read (a cache) would be what goes stale.
  await ca.put('p', 'x', { n: -1 });
  await cb.get('p', 'x');
  const stale: string[] = [];
  for (let n = 0; n < 300; n++) {
    await ca.put('p', 'x', { n });
    const got = await cb.get('p', 'x');
    if (got?.doc.n !== n) stale.push(`get after write ${n}: ${got?.doc.n}`);
    if (n % 3 === 0) {
      await ca.put('p', `y${n}`, { n });
      const listed = await cb.list('p', 'y');
      if (!listed.some((d) => d.name === `y${n}` && d.doc.n === n)) stale.push(`list after creating y${n}`);
      await ca.delete('p', `y${n}`);
      if (await cb.get('p', `y${n}`)) stale.push(`get after deleting y${n}`);
    }
  }
  t.deepEqual(stale, [], 'no read missed a write acknowledged before it began');
  t.true(b.backend.copy.ready, 'the reads were answered by the copy');
  await Promise.all([a.store.close(), b.store.close()]);
});

serial('readers hammering one member never see less than what was acknowledged before they began', async (t) => {
  const stores = await Promise.all([open(0), open(1), open(2)]);
  const [a, b, c] = stores as [typeof stores[0], typeof stores[0], typeof stores[0]];
  const ns = (s: typeof a) => s.store.namespace('hammer').collection<{ n: number }>('counters');
  await ns(a).put('', 'n', { n: 0 });
  let acked = 0;
  let stop = false;
  // Two writers on two other members take turns on one counter (compare-and-swap); each success raises the floor.
  const writer = (s: typeof a) => (async () => {
    while (!stop) {
      const current = await ns(s).get('', 'n');
      try {
        const done = await ns(s).put('', 'n', { n: current!.doc.n + 1 }, current!.rev);
        acked = Math.max(acked, done.doc.n);
      } catch {
        // The other writer got in first.
      }
    }
  })();
  const problems: string[] = [];
  let reads = 0;
  const reader = (i: number) => (async () => {
    while (!stop) {
      const floor = acked;
      const doc = i % 2 ? (await ns(b).list('')).find((d) => d.name === 'n') : await ns(b).get('', 'n');
      reads++;
      if (!doc || doc.doc.n < floor) problems.push(`reader ${i} read ${doc?.doc.n} after ${floor} was acknowledged`);
    }
  })();
  const checksBefore = b.backend.checksSent;
  const running = [writer(a), writer(c), ...Array.from({ length: 6 }, (_, i) => reader(i))];
  await sleep(3000);
  stop = true;
  await Promise.all(running);
  const checks = b.backend.checksSent - checksBefore;
  t.log(`${reads} reads on b while ${acked} writes were acknowledged on a and c; ${checks} freshness checks`);
  t.deepEqual(problems.slice(0, 5), []);
  t.true(acked > 20, 'the writers made progress');
  t.true(checks < reads, 'concurrent reads shared freshness checks');
  await Promise.all(stores.map((s) => s.store.close()));
});

serial('concurrent reads share one freshness check: a burst costs at most two round trips', async (t) => {
  const a = await open(1);
  const c = a.store.namespace('burst').collection<{ n: number }>('docs');
  for (let i = 0; i < 20; i++) await c.put('', `d${i}`, { n: i });
  const before = a.backend.checksSent;
  const got = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? c.list('') : c.get('', `d${i}`))));
  const checks = a.backend.checksSent - before;
  t.is(got.filter((g) => g !== undefined).length, 20);
  // One check, or one already on the wire and the one every later reader shares.
  t.true(checks <= 2, `${checks} checks for 20 reads`);
  await a.store.close();
});

/** `write`, again while the cluster database answers 503 (an election after a member died), for at most 15 s. */
async function untilQuorum<T>(write: () => Promise<T>): Promise<T> {
  for (const end = Date.now() + 15_000; ; await sleep(200)) {
    try {
      return await write();
    } catch (err) {
      if ((err as { status?: number }).status !== 503 || Date.now() > end) throw err;
    }
  }
}

serial('a member whose etcd dies and restarts reloads its copy and misses no write made meanwhile', async (t) => {
  const a = await open(0);
  const b = await open(2);
  const ca = a.store.namespace('resync').collection<{ n: number }>('docs');
  const cb = b.store.namespace('resync').collection<{ n: number }>('docs');
  await ca.put('', 'before', { n: 1 });
  t.is((await cb.get('', 'before'))?.doc.n, 1);
  const heard: string[] = [];
  b.store.namespace('resync').onChange((ch) => heard.push(ch.name));
  // Kill b's etcd member; its supervisor starts it again. Meanwhile a (quorum of two) writes.
  process.kill(etcd!.members[2]!.member.pid!, 'SIGKILL');
  await sleep(100);
  // Member 2 may have led: a write during the election is refused with a 503 ("try again later"), as clients are told.
  await untilQuorum(() => ca.put('', 'during', { n: 2 }));
  await untilQuorum(() => ca.delete('', 'before'));
  let seen: { during?: number; before?: number } | undefined;
  for (const end = Date.now() + 15_000; Date.now() < end && !seen; await sleep(100)) {
    seen = await Promise.all([cb.get('', 'during'), cb.get('', 'before')])
      .then(([d, bf]) => ({ during: d?.doc.n, before: bf?.doc.n }), () => undefined);
  }
  t.deepEqual(seen, { during: 2, before: undefined }, 'b reads what a wrote while its etcd was down');
  // The copy is back (loaded again, the watch running from it) and follows new writes.
  for (const end = Date.now() + 5000; Date.now() < end && !b.backend.copy.ready;) await sleep(50);
  t.true(b.backend.copy.ready, 'the copy was loaded again');
  await untilQuorum(() => ca.put('', 'after', { n: 3 }));
  t.is((await cb.get('', 'after'))?.doc.n, 3);
  t.true(b.backend.copy.ready);
  await Promise.all([a.store.close(), b.store.close()]);
});

serial('the copy\'s memory: 10,000 documents of about 1 KiB', async (t) => {
  const loader = await open(0);
  const body = JSON.stringify({ config: { 'user.padding': 'x'.repeat(900) }, devices: { root: { path: '/', pool: 'default', type: 'disk' } } });
  const dump = { docs: Array.from({ length: 10_000 }, (_, i) => ({ namespace: 'mem', collection: 'instances', project: 'default', name: `c${i}`, rev: 1, body })), versions: new Map<string, number>() };
  await loader.backend.load(dump);
  const raw = dump.docs.reduce((sum, d) => sum + docKey(d).length + encodeValue(d.rev, d.body).length, 0);
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  const probe = await open(1);
  gc();
  const heapAfter = process.memoryUsage().heapUsed;
  const size = probe.backend.copy.size();
  const listed = await probe.store.namespace('mem').collection('instances').list('default');
  t.is(listed.length, 10_000);
  const mib = (n: number) => (n / 1024 / 1024).toFixed(1);
  t.log(`copy of ${size.docs} documents, ${mib(raw)} MiB of keys and values: heap grew ${mib(heapAfter - heapBefore)} MiB`);
  t.true(size.docs >= 10_000);
  // Strings of one-byte characters are kept as bytes: the copy costs about what it holds, plus entry overhead.
  t.true(heapAfter - heapBefore < raw * 3, 'the copy costs no more than three times the bytes it holds');
  await loader.backend.connection.client.delete().prefix(docPrefix('mem', 'instances'));
  await Promise.all([loader.store.close(), probe.store.close()]);
});

serial('a request\'s reads share one check until news from a peer arrives; then a write acknowledged elsewhere is seen', async (t) => {
  const a = await open(0);
  const b = await open(1);
  const ca = a.store.namespace('scope').collection<{ n: number }>('docs');
  const cb = b.store.namespace('scope').collection<{ n: number }>('docs');
  await ca.put('', 'x', { n: 0 });
  await withReadScope(async () => {
    const before = b.backend.checksSent;
    for (let i = 0; i < 5; i++) await cb.get('', 'x');
    await cb.list('');
    t.is(b.backend.checksSent - before, 1, 'six reads in one request, one check');
    for (let n = 1; n <= 50; n++) {
      // As when a peer answers this request: the write is acknowledged, and the answer is news from a peer.
      await ca.put('', 'x', { n });
      noteNews();
      t.is((await cb.get('', 'x'))?.doc.n, n);
    }
    t.true(b.backend.checksSent - before > 1, 'news from a peer made the next read check again');
  });
  // Outside a request scope, each read checks.
  const before = b.backend.checksSent;
  await cb.get('', 'x');
  await cb.get('', 'x');
  t.is(b.backend.checksSent - before, 2);
  await Promise.all([a.store.close(), b.store.close()]);
});
