/**
 * Placement within a cluster group (`?target=@<group>`): the choice itself, and how a member's groups change
 * on an edit. The end-to-end path is test/e2e/cluster-groups.test.ts.
 */
import test from 'ava';
import { leastLoaded } from '../../plugins/instances/placement.js';
import { checkGroupName, reorderedGroups } from '../../plugins/clustering/groups.js';

const members = [
  { name: 'm1', address: '10.0.0.1:8443', online: true },
  { name: 'm2', address: '10.0.0.2:8443', online: true, placeable: false, placeableInGroup: true },
  { name: 'm3', address: '10.0.0.3:8443', online: true, placeable: false, placeableInGroup: false },
  { name: 'm4', address: '10.0.0.4:8443', online: false },
];

test('within a group only its members count, the emptiest first; scheduler.instance=group members too, manual and offline ones never', (t) => {
  const counts = new Map([['m1', 0], ['m2', 5], ['m3', 0], ['m4', 0]]);
  t.is(leastLoaded(members, counts, new Set(['m2', 'm3', 'm4'])), 'm2');
  t.is(leastLoaded(members, counts, new Set(['m1', 'm2'])), 'm1');
  t.is(leastLoaded(members, new Map([['m1', 6]]), new Set(['m1', 'm2'])), 'm2');
  t.is(leastLoaded(members, counts, new Set(['m3', 'm4'])), undefined, 'no member of the group may be picked');
  t.is(leastLoaded(members, counts, new Set()), undefined, 'an empty group');
  // Without a group, a scheduler.instance=group member is never picked.
  t.is(leastLoaded(members, new Map([['m1', 9]])), 'm1');
});

test('a member edit keeps the groups it keeps in place and appends the new ones in the order asked', (t) => {
  t.deepEqual(reorderedGroups(['default', 'g2'], ['g2', 'default']), ['default', 'g2']);
  t.deepEqual(reorderedGroups(['g2'], ['default', 'g2', 'g1']), ['g2', 'default', 'g1']);
  t.deepEqual(reorderedGroups(['default', 'g1'], ['g1']), ['g1']);
});

test('group names the API can carry in a path and that @ can name', (t) => {
  for (const ok of ['g1', 'fast-nodes', 'rack_1', 'A.b']) t.is(checkGroupName(ok), ok);
  for (const bad of ['', 'a/b', '@g', 'a b', '.', '..', 'x?y', 'x'.repeat(64), 7]) t.throws(() => checkGroupName(bad), undefined, String(bad));
});
