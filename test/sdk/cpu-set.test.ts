/** CPU sets as `limits.cpu` pins them: ids and ranges merged, bounded by what Linux counts. */
import test from 'ava';
import { MAX_CPUS, parseCpuSet } from '../../sdk/index.js';

test('ids and ranges, merged, ascending, each once', (t) => {
  t.deepEqual(parseCpuSet('3'), [3]);
  t.deepEqual(parseCpuSet('0-1,3'), [0, 1, 3]);
  t.deepEqual(parseCpuSet('4-6,0,5-8,1,'), [0, 1, 4, 5, 6, 7, 8]);
  t.is(parseCpuSet(`0-${MAX_CPUS - 1}`).length, MAX_CPUS);
});

test('malformed, backwards or past the largest CPU id: an error naming it, at once', (t) => {
  t.throws(() => parseCpuSet('a-b'), { message: /Invalid CPU set "a-b"/ });
  t.throws(() => parseCpuSet('3-1'), { message: /Invalid CPU range "3-1"/ });
  t.throws(() => parseCpuSet(`0-${MAX_CPUS}`), { message: new RegExp(`CPU id ${MAX_CPUS} is out of range`) });
  // This value held the daemon for minutes before the bound; many whole ranges merge instead of adding up.
  const started = Date.now();
  t.throws(() => parseCpuSet('0-4000000000'), { message: /out of range/ });
  t.is(parseCpuSet(Array(2000).fill(`0-${MAX_CPUS - 1}`).join(',')).length, MAX_CPUS);
  t.true(Date.now() - started < 1000, `${Date.now() - started} ms`);
});
