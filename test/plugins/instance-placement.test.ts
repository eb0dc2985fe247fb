/** Placement of new instances in a cluster: the choice itself (the end-to-end path is test/e2e/cluster-instances.test.ts). */
import test from 'ava';
import { leastLoaded } from '../../plugins/instances/placement.js';
import { isEvacuationMode } from '../../plugins/instances/evacuation.js';

const members = [
  { name: 'm1', address: '10.0.0.1:8443', online: true },
  { name: 'm2', address: '10.0.0.2:8443', online: true },
  { name: 'm3', address: '10.0.0.3:8443', online: false },
];

test('the online member with the fewest instances is chosen; an offline one never', (t) => {
  t.is(leastLoaded(members, new Map([['m1', 3], ['m2', 1]])), 'm2');
  t.is(leastLoaded(members, new Map([['m1', 0], ['m2', 1]])), 'm1');
  // m3 holds nothing but is offline.
  t.is(leastLoaded(members, new Map([['m1', 5], ['m2', 5]])), 'm1', 'a tie goes to the member listed first');
  t.is(leastLoaded(members, new Map()), 'm1');
});

test('a member that takes instances by name only (evacuated, scheduler.instance=manual) is passed over', (t) => {
  t.is(leastLoaded([{ ...members[0]!, placeable: false }, members[1]!], new Map([['m2', 9]])), 'm2');
  t.is(leastLoaded([{ ...members[0]!, placeable: false }], new Map()), undefined);
});

test('no online member: no choice', (t) => {
  t.is(leastLoaded(members.map((m) => ({ ...m, online: false })), new Map()), undefined);
  t.is(leastLoaded([], new Map()), undefined);
});

test('evacuation modes are the reference\'s three', (t) => {
  t.true(['auto', 'stop', 'migrate'].every(isEvacuationMode));
  t.false(isEvacuationMode('live-migrate'));
});
