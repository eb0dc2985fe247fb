/**
 * The percentage progress of a stage with a known total (the image unpack): the reference's keys
 * and line, a report when the percentage moves and at most one per interval, the end always shown.
 */
import test from 'ava';
import { PERCENT_INTERVAL_MS, percentReporter } from '../../sdk/lib/operations/index.js';

function fakeOp() {
  const shown: Record<string, any>[] = [];
  return { shown, op: { id: 'x', signal: new AbortController().signal, updateMetadata: (m: Record<string, unknown>) => shown.push(m) } };
}

function withClock(t: { teardown(fn: () => void): void }): { advance(ms: number): void } {
  const realNow = Date.now;
  let now = 1_000_000;
  Date.now = () => now;
  t.teardown(() => (Date.now = realNow));
  return { advance: (ms) => (now += ms) };
}

test.serial('the first percent is shown at once, in the reference\'s keys (no "processed" beside a percentage)', (t) => {
  const clock = withClock(t);
  const { op, shown } = fakeOp();
  const report = percentReporter(op, 'create_instance_from_image_unpack', 'Unpack');
  report(0, 4_000_000);
  t.is(shown.length, 0, 'nothing read, nothing to say');
  clock.advance(500);
  report(20_000, 4_000_000);
  t.deepEqual(shown, [{
    create_instance_from_image_unpack_progress: 'Unpack: 1% (40.00kB/s)',
    progress: { stage: 'create_instance_from_image_unpack', percent: '1', speed: '40000' },
  }]);
});

test.serial('reports are rate-limited and never repeat a percentage; the end is always reported, once', (t) => {
  const clock = withClock(t);
  const { op, shown } = fakeOp();
  const report = percentReporter(op, 's', 'L');
  const total = 1000;
  // Every byte read, 1 ms apart: a thousand calls over one second.
  for (let done = 1; done < total; done++) {
    clock.advance(1);
    report(done, total);
  }
  const percents = shown.map((m) => Number(m.progress.percent));
  t.true(shown.length <= Math.ceil(1000 / PERCENT_INTERVAL_MS) + 1, `${shown.length} reports in a second`);
  t.deepEqual(percents, [...percents].sort((a, b) => a - b));
  t.is(new Set(percents).size, percents.length);
  t.true(percents.at(-1)! < 100, 'not done yet');
  clock.advance(1);
  report(total, total);
  t.is(shown.at(-1)!.progress.percent, '100', 'the end is shown at once');
  t.is(shown.at(-1)!.s_progress, 'L: 100% (1.00kB/s)');
  const count = shown.length;
  clock.advance(1000);
  report(total, total);
  t.is(shown.length, count, 'and only once');
});

test.serial('an unknown or empty total reports nothing', (t) => {
  withClock(t);
  const { op, shown } = fakeOp();
  const report = percentReporter(op, 's', 'L');
  report(10, 0);
  t.is(shown.length, 0);
});
