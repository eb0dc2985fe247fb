/** The used_by registry: providers' answers merged and sorted, and one memo shared by a listing. */
import test from 'ava';
import { createUsedByRegistry, UsedByMemo } from '../../sdk/index.js';

test('answers are merged, sorted and without duplicates', async (t) => {
  const usedBy = createUsedByRegistry();
  usedBy.add((_project, name) => [`/1.0/b/${name}`, `/1.0/a/${name}`]);
  usedBy.add(async (_project, name) => [`/1.0/a/${name}`]);
  t.deepEqual(await usedBy.collect('default', 'x'), ['/1.0/a/x', '/1.0/b/x']);
});

test('answers already in order are merged as they are; a repeat or an unordered answer is sorted as before', async (t) => {
  const usedBy = createUsedByRegistry();
  usedBy.add(() => ['/1.0/instances/a', '/1.0/instances/c', '/1.0/instances/e']);
  usedBy.add(() => []);
  usedBy.add(() => ['/1.0/instances/b', '/1.0/instances/c', '/1.0/profiles/default']);
  t.deepEqual(await usedBy.collect('default', 'x'), ['/1.0/instances/a', '/1.0/instances/b', '/1.0/instances/c', '/1.0/instances/e', '/1.0/profiles/default']);
  const unordered = createUsedByRegistry();
  unordered.add(() => ['/1.0/instances/b', '/1.0/instances/a']);
  unordered.add(() => ['/1.0/instances/a', '/1.0/instances/a']);
  t.deepEqual(await unordered.collect('default', 'x'), ['/1.0/instances/a', '/1.0/instances/b']);
  const single = createUsedByRegistry();
  single.add(() => ['/1.0/instances/a', '/1.0/instances/a']);
  t.deepEqual(await single.collect('default', 'x'), ['/1.0/instances/a']);
});

test('a memo passed to every collect of a listing runs the shared work once; without one each collect runs it', async (t) => {
  const usedBy = createUsedByRegistry();
  let listings = 0;
  const list = async () => {
    listings++;
    return ['n1', 'n2', 'n1'];
  };
  usedBy.add(async (_project, name, memo) => (await memo.get('things', list)).filter((n) => n === name).map(() => `/1.0/things/${name}`));
  const memo = new UsedByMemo();
  t.deepEqual(await Promise.all(['n1', 'n2', 'n3'].map((n) => usedBy.collect('default', n, memo))), [['/1.0/things/n1'], ['/1.0/things/n2'], []]);
  t.is(listings, 1);
  await usedBy.collect('default', 'n1');
  await usedBy.collect('default', 'n2');
  t.is(listings, 3);
});
