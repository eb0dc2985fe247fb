import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DocumentStore } from '../../kernel/store/document-store.js';
import { EtcdBackend } from '../../kernel/store/etcd-backend.js';
import { ApiError, type StoreChange } from '../../sdk/index.js';
import { hasEtcd, startEtcdCluster, type TestEtcdCluster } from '../helpers/etcd-cluster.js';


/** One backend under the same contract: a fresh store, and a store with a way to open it again. */
interface Kit {
  label: string;
  open(): Promise<DocumentStore>;
  withStore(fn: (store: DocumentStore, reopen: () => Promise<DocumentStore>) => Promise<void>): Promise<void>;
}

const sqliteKit: Kit = {
  label: 'sqlite',
  open: () => DocumentStore.open(':memory:'),
  async withStore(fn) {
    const dir = mkdtempSync(path.join(tmpdir(), 'corral-store-'));
    const file = path.join(dir, 'state.db');
    const store = await DocumentStore.open(file);
    try {
      await fn(store, () => DocumentStore.open(file));
    } finally {
      await store.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

// One etcd member for the whole file (127.0.19.1); every test starts from an empty keyspace.
let etcd: TestEtcdCluster | undefined;
const etcdKit: Kit = {
  label: 'etcd',
  async open() {
    const conn = (await etcd!.members[0]!.connect());
    await conn.client.delete().all();
    return DocumentStore.over(new EtcdBackend(conn));
  },
  async withStore(fn) {
    const store = await etcdKit.open();
    try {
      await fn(store, async () => DocumentStore.over(new EtcdBackend(await etcd!.members[0]!.connect())));
    } finally {
      await store.close().catch(() => undefined);
    }
  },
};

if (!hasEtcd) {
  test.before(async () => {
    etcd = await startEtcdCluster(['127.0.19.1']);
  });
  test.after.always(async () => {
    await etcd?.stop();
  });
}

if (hasEtcd) test.skip(`etcd: the store contract (skipped: ${hasEtcd})`, () => undefined);

for (const kit of [sqliteKit, ...(hasEtcd ? [] : [etcdKit])]) {
  test.serial(`${kit.label}: documents are stored, listed by project and prefix, and revisioned`, async (t) => {
    const store = await kit.open();
    const things = store.namespace('a').collection<{ n: number }>('things');
    const first = await things.put('default', 'one', { n: 1 }, 0);
    t.is(first.rev, 1);
    t.is((await things.put('default', 'one', { n: 2 }, 1)).rev, 2);
    await things.put('default', 'two', { n: 3 });
    await things.put('other', 'one', { n: 4 });
    t.deepEqual((await things.list('default')).map((d) => [d.name, d.doc.n, d.rev]), [['one', 2, 2], ['two', 3, 1]]);
    t.is((await things.list()).length, 3);
    t.deepEqual((await things.list('default', 'tw')).map((d) => d.name), ['two']);
    t.deepEqual((await things.get('other', 'one'))?.doc, { n: 4 });
    t.is(await things.get('default', 'three'), undefined);
    // Namespaces do not see each other.
    t.is((await store.namespace('b').collection('things').list()).length, 0);
    await store.close();
  });

  test.serial(`${kit.label}: a listing is never stale: every acknowledged write and delete shows in the next one, racing listings included`, async (t) => {
    const store = await kit.open();
    const things = store.namespace('a').collection<{ n: number }>('things');
    const names = (list: { name: string }[]) => list.map((d) => d.name).sort();
    const expected = new Set<string>();
    // Listings in flight while the writes land: a listing that overlapped a change must not be kept.
    let racing = true;
    const racer = (async () => {
      while (racing) {
        await Promise.all([things.list('p'), things.list('p', 'x'), things.list()]);
        // A cached listing answers at once: let the writes' I/O run between rounds.
        await new Promise((r) => setImmediate(r));
      }
    })();
    for (let i = 0; i < 60; i++) {
      const name = `x${i % 7}`;
      if (expected.has(name) && i % 3 === 0) {
        await things.delete('p', name);
        expected.delete(name);
      } else {
        await things.put('p', name, { n: i });
        expected.add(name);
      }
      t.deepEqual(names(await things.list('p')), [...expected].sort(), `after step ${i}`);
      t.deepEqual(names(await things.list('p', 'x')), [...expected].sort(), `by prefix, after step ${i}`);
      if (expected.has(name)) t.is((await things.list('p')).find((d) => d.name === name)?.doc.n, i, 'the document as written');
    }
    racing = false;
    await racer;
    // A caller changing what it was given changes nothing for the next caller.
    const listed = await things.list('p');
    listed[0]!.doc.n = -1;
    t.not((await things.list('p'))[0]!.doc.n, -1);
    // Inside a transaction its own writes are listed; outside, only once it committed.
    await store.namespace('a').transaction(async (tx) => {
      const inTx = tx.collection<{ n: number }>('things');
      await inTx.put('p', 'y-in-tx', { n: 1 });
      t.true((await inTx.list('p')).some((d) => d.name === 'y-in-tx'));
    });
    t.true((await things.list('p')).some((d) => d.name === 'y-in-tx'));
    await store.close();
  });

  test.serial(`${kit.label}: compare-and-swap refuses stale revisions and duplicate creations`, async (t) => {
    const store = await kit.open();
    const things = store.namespace('a').collection<{ n: number }>('things');
    await things.put('p', 'x', { n: 1 }, 0);
    const dup = await t.throwsAsync(things.put('p', 'x', { n: 1 }, 0));
    t.is((dup as ApiError).status, 409);
    const stale = await t.throwsAsync(things.put('p', 'x', { n: 2 }, 7));
    t.is((stale as ApiError).status, 412);
    t.is((await things.get('p', 'x'))?.doc.n, 1);
    const staleDelete = await t.throwsAsync(things.delete('p', 'x', 3));
    t.is((staleDelete as ApiError).status, 412);
    t.true(await things.delete('p', 'x', 1));
    t.false(await things.delete('p', 'x'));
    await store.close();
  });

  test.serial(`${kit.label}: a failed transaction leaves nothing behind and publishes no change`, async (t) => {
    const store = await kit.open();
    const ns = store.namespace('a');
    const changes: StoreChange[] = [];
    ns.onChange((c) => changes.push(c));
    await t.throwsAsync(ns.transaction(async (tx) => {
      await tx.collection('things').put('p', 'x', { n: 1 });
      await tx.collection('things').put('p', 'y', { n: 2 });
      throw new Error('later step failed');
    }), { message: 'later step failed' });
    t.is((await ns.collection('things').list()).length, 0);
    t.is(changes.length, 0);
    await ns.transaction(async (tx) => {
      await tx.collection('things').put('p', 'x', { n: 1 });
      await tx.collection('things').rename('p', 'x', 'q', 'z');
    });
    t.deepEqual((await ns.collection('things').list()).map((d) => [d.project, d.name]), [['q', 'z']]);
    t.deepEqual(changes.map((c) => `${c.kind}:${c.project}/${c.name}`), ['put:p/x', 'delete:p/x', 'put:q/z']);
    await store.close();
  });

  test.serial(`${kit.label}: migrations run once per namespace, in version order`, async (t) => {
    await kit.withStore(async (store, reopen) => {
      const ran: string[] = [];
      const steps = [
        { version: 2, description: 'second', up: async () => { ran.push('2'); } },
        { version: 1, description: 'first', up: async (s: import('../../sdk/index.js').Store) => { ran.push('1'); await s.collection('c').put('', 'seed', { v: 1 }); } },
      ];
      await store.namespace('m').migrate(steps);
      await store.namespace('m').migrate(steps);
      await store.namespace('other').migrate([{ version: 1, description: 'x', up: async () => { ran.push('other'); } }]);
      t.deepEqual(ran, ['1', '2', 'other']);
      await store.close();
      // The versions and data survive a reopen.
      const again = await reopen();
      await again.namespace('m').migrate([...steps, { version: 3, description: 'third', up: async () => { ran.push('3'); } }]);
      t.deepEqual(ran, ['1', '2', 'other', '3']);
      t.deepEqual((await again.namespace('m').collection('c').get('', 'seed'))?.doc, { v: 1 });
      await again.close();
    });
  });

  test.serial(`${kit.label}: reads see committed writes while another transaction is open (WAL)`, async (t) => {
    await kit.withStore(async (store) => {
      const c = store.namespace('a').collection<{ n: number }>('c');
      await c.put('', 'x', { n: 1 });
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const tx = store.namespace('a').transaction(async (txs) => {
        await txs.collection('c').put('', 'x', { n: 2 });
        await gate;
      });
      await new Promise((r) => setTimeout(r, 20));
      t.is((await c.get('', 'x'))?.doc.n, 1, 'the uncommitted write is invisible');
      release();
      await tx;
      t.is((await c.get('', 'x'))?.doc.n, 2);
    });
  });

  test.serial(`${kit.label}: cached reads follow every committed change and never outlive it`, async (t) => {
    await kit.withStore(async (store) => {
      const c = store.namespace('a').collection<{ n: number }>('c');
      await c.put('p', 'x', { n: 1 });
      t.is((await c.get('p', 'x'))?.doc.n, 1);
      t.is((await c.get('p', 'x'))?.doc.n, 1, 'served from memory');
      const copy = (await c.get('p', 'x'))!;
      copy.doc.n = 99;
      t.is((await c.get('p', 'x'))?.doc.n, 1, 'callers get their own copy');
      await c.put('p', 'x', { n: 2 });
      t.deepEqual(await c.get('p', 'x'), { project: 'p', name: 'x', rev: 2, doc: { n: 2 } });
      await c.rename('p', 'x', 'p', 'y');
      t.is(await c.get('p', 'x'), undefined);
      t.is((await c.get('p', 'y'))?.rev, 3);
      await store.namespace('a').transaction(async (tx) => {
        await tx.collection<{ n: number }>('c').put('p', 'y', { n: 3 });
        t.is((await tx.collection<{ n: number }>('c').get('p', 'y'))?.doc.n, 3, 'a transaction sees its own write');
        t.is((await c.get('p', 'y'))?.doc.n, 2, 'others see the committed one');
      });
      t.is((await c.get('p', 'y'))?.doc.n, 3);
      await store.namespace('a').transaction(async (tx) => {
        await tx.collection('c').delete('p', 'y');
        throw new Error('undo');
      }).catch(() => undefined);
      t.is((await c.get('p', 'y'))?.doc.n, 3, 'a rolled back delete leaves the cached row right');
      await c.delete('p', 'y');
      t.is(await c.get('p', 'y'), undefined);
      // Reads racing writes: whatever order they finish in, the last read after the writes is current.
      for (let i = 0; i < 50; i++) {
        await Promise.all([c.put('p', 'race', { n: i }), c.get('p', 'race'), c.get('p', 'race')]);
        t.is((await c.get('p', 'race'))?.doc.n, i);
      }
    });
  });

  test.serial(`${kit.label}: a write outside a transaction leaves its row cached with the right revision; CAS still holds`, async (t) => {
    await kit.withStore(async (store) => {
      const c = store.namespace('a').collection<{ n: number }>('c');
      await c.put('p', 'w', { n: 1 }, 0);
      await c.get('p', 'w');
      t.is((await c.put('p', 'w', { n: 2 }, 1)).rev, 2, 'the cached revision is the current one');
      await t.throwsAsync(c.put('p', 'w', { n: 3 }, 1), undefined, 'a stale revision is refused');
      await t.throwsAsync(c.put('p', 'w', { n: 3 }, 0), undefined, 'so is a second creation');
      t.deepEqual(await c.get('p', 'w'), { project: 'p', name: 'w', rev: 2, doc: { n: 2 } });
      // What a transaction writes is never served from the cache of an earlier single write.
      await store.namespace('a').transaction(async (tx) => {
        await tx.collection<{ n: number }>('c').put('p', 'w', { n: 4 }, 2);
      });
      t.deepEqual(await c.get('p', 'w'), { project: 'p', name: 'w', rev: 3, doc: { n: 4 } });
      t.is((await c.put('p', 'w', { n: 5 }, 3)).rev, 4);
    });
  });
}
