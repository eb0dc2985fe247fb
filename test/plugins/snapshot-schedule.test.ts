import test from 'ava';
import { isApiError } from '../../sdk/index.js';
import { parseSchedule, splitScheduleEntries, spreadFor, type Schedule } from '../../sdk/lib/snapshots/schedule.js';
import { expiryFrom, parseExpiry } from '../../sdk/lib/snapshots/expiry.js';
import { checkSnapshotName, formatGoTime, nextSnapshotName, validateSnapshotPattern } from '../../sdk/lib/snapshots/pattern.js';
import { SNAPSHOT_KEYS } from '../../plugins/instances/snapshots/keys.js';

// Local time throughout, as the schedule and expiry modules work in the host's local time.
const at = (y: number, mo: number, d: number, h = 0, mi = 0, s = 0, ms = 0) => new Date(y, mo - 1, d, h, mi, s, ms);
const inst = (v: string) => parseSchedule(v, { allowStartup: true });

/** Every minute of the given local day that the schedule matches, as "HH:MM". */
function minutesOf(s: Schedule, y: number, mo: number, d: number): string[] {
  const out: string[] = [];
  for (let m = 0; m < 24 * 60; m++) {
    const t = at(y, mo, d, Math.floor(m / 60), m % 60);
    if (s.matches(t)) out.push(`${String(t.getHours()).padStart(2, '0')}:${String(t.getMinutes()).padStart(2, '0')}`);
  }
  return out;
}

// --- schedule ---

test('an empty schedule is empty and never matches', (t) => {
  for (const v of ['', '   ']) {
    const s = inst(v);
    t.true(s.isEmpty);
    t.false(s.onStartup);
    t.deepEqual(s.entries, []);
    t.false(s.matches(at(2024, 1, 1)));
    t.is(s.next(at(2024, 1, 1)), undefined);
  }
});

test('@hourly fires at minute 0 of every hour', (t) => {
  const s = inst('@hourly');
  t.false(s.isEmpty);
  t.is(minutesOf(s, 2024, 6, 5).length, 24);
  t.true(s.matches(at(2024, 6, 5, 10, 0)));
  t.true(s.matches(at(2024, 6, 5, 10, 0, 59)), 'seconds are ignored');
  t.false(s.matches(at(2024, 6, 5, 10, 1)));
});

test('@daily and @midnight fire at 00:00 only', (t) => {
  for (const alias of ['@daily', '@midnight']) {
    const s = inst(alias);
    t.deepEqual(minutesOf(s, 2024, 6, 5), ['00:00'], alias);
    t.deepEqual(minutesOf(s, 2024, 2, 29), ['00:00'], alias);
  }
});

test('@weekly fires on Sunday at 00:00', (t) => {
  const s = inst('@weekly');
  t.deepEqual(minutesOf(s, 2024, 6, 2), ['00:00']); // Sunday
  for (let d = 3; d <= 8; d++) t.deepEqual(minutesOf(s, 2024, 6, d), [], `June ${d}`);
});

test('@monthly fires on the 1st at 00:00', (t) => {
  const s = inst('@monthly');
  t.true(s.matches(at(2024, 7, 1)));
  t.true(s.matches(at(2024, 12, 1)));
  t.false(s.matches(at(2024, 7, 2)));
  t.false(s.matches(at(2024, 7, 1, 0, 1)));
});

test('@annually and @yearly fire on January 1st at 00:00', (t) => {
  for (const alias of ['@annually', '@yearly']) {
    const s = inst(alias);
    t.true(s.matches(at(2025, 1, 1)), alias);
    t.false(s.matches(at(2025, 2, 1)), alias);
    t.false(s.matches(at(2025, 1, 2)), alias);
    t.deepEqual(s.next(at(2024, 3, 10, 12)), at(2025, 1, 1));
  }
});

test('@startup is accepted for instances and never matches a time', (t) => {
  const s = inst('@startup');
  t.true(s.onStartup);
  t.false(s.isEmpty);
  t.deepEqual(minutesOf(s, 2024, 1, 1), []);
  t.is(s.next(at(2024, 1, 1)), undefined);
  const both = inst('@startup, @daily');
  t.true(both.onStartup);
  t.true(both.matches(at(2024, 1, 2)));
});

test('@startup is refused where it is not allowed', (t) => {
  const err = t.throws(() => parseSchedule('@daily, @startup', { allowStartup: false }));
  t.regex(err!.message, /"@startup".*only allowed for instances/);
  t.notThrows(() => parseSchedule('@daily', { allowStartup: false }));
});

test('cron ranges, steps and lists', (t) => {
  const s = inst('*/15 9-17 * * 1-5');
  t.true(s.matches(at(2024, 6, 3, 9, 45))); // Monday
  t.true(s.matches(at(2024, 6, 7, 17, 0))); // Friday
  t.false(s.matches(at(2024, 6, 3, 9, 10)));
  t.false(s.matches(at(2024, 6, 3, 18, 0)));
  t.false(s.matches(at(2024, 6, 8, 9, 0))); // Saturday
  t.deepEqual(minutesOf(inst('0-30/10 3 * * *'), 2024, 6, 3), ['03:00', '03:10', '03:20', '03:30']);
  t.deepEqual(minutesOf(inst('5/20 3 * * *'), 2024, 6, 3), ['03:05', '03:25', '03:45'], 'a/n runs from a to the end');
  t.deepEqual(minutesOf(inst('0 1,13,22 * * *'), 2024, 6, 3), ['01:00', '13:00', '22:00']);
  t.deepEqual(minutesOf(inst('7,50-52 0 * * *'), 2024, 6, 3), ['00:07', '00:50', '00:51', '00:52']);
  const lists = inst('0 0 1,15 * *');
  t.true(lists.matches(at(2024, 6, 1)));
  t.true(lists.matches(at(2024, 6, 15)));
  t.false(lists.matches(at(2024, 6, 14)));
  t.deepEqual(lists.entries, ['0 0 1,15 * *'], 'a list inside a field is not an entry separator');
});

test('month and weekday names, and 7 as Sunday', (t) => {
  const s = inst('0 12 * jan-mar,DEC * ');
  t.true(s.matches(at(2024, 2, 10, 12)));
  t.true(s.matches(at(2024, 12, 10, 12)));
  t.false(s.matches(at(2024, 4, 10, 12)));
  const days = inst('0 0 * * mon,Fri');
  t.true(days.matches(at(2024, 6, 3))); // Monday
  t.true(days.matches(at(2024, 6, 7))); // Friday
  t.false(days.matches(at(2024, 6, 4)));
  for (const sunday of ['0 0 * * 7', '0 0 * * 0', '0 0 * * sun']) {
    t.true(inst(sunday).matches(at(2024, 6, 2)), sunday);
    t.false(inst(sunday).matches(at(2024, 6, 1)), sunday);
  }
  const weekend = inst('0 0 * * 5-7');
  t.deepEqual([1, 2, 3, 4, 5, 6, 7, 8].filter((d) => weekend.matches(at(2024, 6, d))), [1, 2, 7, 8]);
  const odd = inst('0 0 * * 1/2');
  t.deepEqual([2, 3, 4, 5, 6, 7, 8].filter((d) => odd.matches(at(2024, 6, d))), [3, 5, 7], 'open-ended weekday steps stop at Saturday');
});

test('day-of-month and day-of-week: either matches when both are restricted', (t) => {
  const s = inst('0 0 13 * 5');
  t.true(s.matches(at(2024, 6, 7)), 'a Friday that is not the 13th');
  t.true(s.matches(at(2024, 6, 13)), 'the 13th, a Thursday');
  t.false(s.matches(at(2024, 6, 8)));
  const domOnly = inst('0 0 13 * *');
  t.false(domOnly.matches(at(2024, 6, 7)));
  t.true(domOnly.matches(at(2024, 6, 13)));
  const dowOnly = inst('0 0 * * 5');
  t.true(dowOnly.matches(at(2024, 6, 7)));
  t.false(dowOnly.matches(at(2024, 6, 13)));
  // A stepped wildcard restricts the field (as the reference's cron library reads it).
  const stepped = inst('0 0 1 * */3');
  t.true(stepped.matches(at(2024, 6, 1)), 'the 1st');
  t.true(stepped.matches(at(2024, 6, 5)), 'a Wednesday');
  t.false(stepped.matches(at(2024, 6, 4)));
});

test('comma-separated entries: each is a schedule of its own', (t) => {
  const s = inst('0 6 * * *, 30 18 * * *');
  t.deepEqual(s.entries, ['0 6 * * *', '30 18 * * *']);
  t.deepEqual(minutesOf(s, 2024, 6, 3), ['06:00', '18:30']);
  const mixed = inst('@hourly,@daily, 0 0 1,15 * *,@monthly');
  t.deepEqual(mixed.entries, ['@hourly', '@daily', '0 0 1,15 * *', '@monthly']);
  t.is(minutesOf(mixed, 2024, 6, 15).length, 24);
  t.deepEqual(splitScheduleEntries('0 0 * * 1,0 12 * * 5'), ['0 0 * * 1', '0 12 * * 5'], 'two complete expressions');
  t.deepEqual(splitScheduleEntries('0 0 * * 1,2,3'), ['0 0 * * 1,2,3']);
  t.deepEqual(splitScheduleEntries('0 * * * *,@daily'), ['0 * * * *', '@daily']);
  const two = inst('0 0 * * 1,0 12 * * 5');
  t.true(two.matches(at(2024, 6, 3, 0, 0)));
  t.true(two.matches(at(2024, 6, 7, 12, 0)));
  t.false(two.matches(at(2024, 6, 7, 0, 0)));
});

test('next finds the first due minute strictly after the given time', (t) => {
  t.deepEqual(inst('@daily').next(at(2024, 6, 1, 10, 30)), at(2024, 6, 2));
  t.deepEqual(inst('@daily').next(at(2024, 6, 2)), at(2024, 6, 3), 'not the same minute');
  t.deepEqual(inst('@daily').next(at(2024, 6, 1, 23, 59, 59)), at(2024, 6, 2));
  t.deepEqual(inst('*/15 * * * *').next(at(2024, 6, 1, 10, 14, 30)), at(2024, 6, 1, 10, 15));
  t.deepEqual(inst('0 0 29 2 *').next(at(2023, 3, 1)), at(2024, 2, 29));
  t.deepEqual(inst('0 0 29 2 *').next(at(2096, 3, 1)), at(2104, 2, 29), '2100 is no leap year');
  t.is(inst('0 0 31 2 *').next(at(2024, 1, 1)), undefined, 'Feb 31 never comes');
  t.deepEqual(inst('0 18 * * *, 0 6 * * *').next(at(2024, 6, 1, 12)), at(2024, 6, 1, 18));
});

test('aliases fall on a minute and hour picked per instance, as the reference spreads them (snapshots_schedule_aliases)', (t) => {
  const subject = 'default/c1';
  const { minute: m, hour: h } = spreadFor(subject);
  const of = (v: string) => parseSchedule(v, { allowStartup: true, subject });
  const from = at(2024, 6, 5, 10, 30);
  // 2024-06-05 is a Wednesday; the next Sunday is 06-09.
  const expected: Record<string, Date> = {
    '@hourly': m > 30 ? at(2024, 6, 5, 10, m) : at(2024, 6, 5, 11, m),
    '@daily': h * 60 + m > 10 * 60 + 30 ? at(2024, 6, 5, h, m) : at(2024, 6, 6, h, m),
    '@midnight': at(2024, 6, 6, 0, m),
    '@weekly': at(2024, 6, 9, h, m),
    '@monthly': at(2024, 7, 1, h, m),
    '@annually': at(2025, 1, 1, h, m),
    '@yearly': at(2025, 1, 1, h, m),
  };
  for (const [alias, next] of Object.entries(expected)) {
    t.deepEqual(of(alias).next(from), next, alias);
    t.true(of(alias).matches(next), alias);
    t.deepEqual(of(alias.toUpperCase()).next(from), next, `${alias} in capitals`);
  }
  t.deepEqual(spreadFor(subject), spreadFor('default/c1'), 'stable for one instance');
  const minutes = new Set(Array.from({ length: 40 }, (_, i) => spreadFor(`default/c${i}`).minute));
  const hours = new Set(Array.from({ length: 40 }, (_, i) => spreadFor(`default/c${i}`).hour));
  t.true(minutes.size > 10 && hours.size > 6, 'instances do not all snapshot at the same time');
  t.deepEqual(spreadFor(undefined), { minute: 0, hour: 0 }, 'without a subject: minute 0 of hour 0');
});

test('@never schedules nothing, alone or beside other entries; @startup alone has no time', (t) => {
  const never = parseSchedule('@never', { allowStartup: true, subject: 'default/c1' });
  t.true(never.isEmpty);
  t.false(never.onStartup);
  t.is(never.next(at(2024, 1, 1)), undefined);
  t.is(minutesOf(never, 2024, 1, 1).length, 0);
  const withStartup = parseSchedule('@never, @startup', { allowStartup: true });
  t.true(withStartup.onStartup);
  t.is(withStartup.next(at(2024, 1, 1)), undefined);
  t.deepEqual(parseSchedule('@never, 0 6 * * *', { allowStartup: false }).next(at(2024, 1, 1)), at(2024, 1, 1, 6));
  t.true(parseSchedule('@Startup', { allowStartup: true }).onStartup);
  t.is(inst('@startup').next(at(2024, 1, 1)), undefined);
});

test('bad schedules are refused with a message naming the bad part', (t) => {
  const cases: [string, RegExp][] = [
    ['0 * * *', /"0 \* \* \*": expected 5 fields .* got 4/],
    ['0 0 * * * *', /got 6/],
    ['60 * * * *', /minute field "60": 60 is out of range 0-59/],
    ['0 24 * * *', /hour field "24": 24 is out of range 0-23/],
    ['0 0 0 * *', /day-of-month field "0": 0 is out of range 1-31/],
    ['0 0 32 * *', /day-of-month field "32"/],
    ['0 0 * 13 *', /month field "13": 13 is out of range 1-12/],
    ['0 0 * * 8', /day-of-week field "8": 8 is out of range 0-7/],
    ['*/0 * * * *', /minute field "\*\/0": step "0" must be a positive integer/],
    ['*/x * * * *', /step "x"/],
    ['5-1 * * * *', /minute field "5-1": range start 5 is after its end 1/],
    ['0 0 * foo *', /month field "foo": "foo" is neither a number nor a month name/],
    ['jan 0 * * *', /minute field "jan": "jan" is not a number/],
    ['0 0 * * mon-', /day-of-week field "mon-": missing value/],
    ['? * * * *', /"\?" is only allowed in the day fields/],
    ['@fortnightly', /"@fortnightly": unknown alias/],
    ['@daily, ', /empty entry/],
    ['@daily, 0 0 1, 15 * *', /"0 0 1": expected 5 fields/],
    ['@daily 0', /unknown alias/],
  ];
  for (const [value, re] of cases) {
    const err = t.throws(() => inst(value), undefined, value);
    t.regex(err!.message, re, value);
  }
});

// --- expiry ---

const from = at(2024, 1, 10, 12, 0);

test('an empty expiry means never', (t) => {
  t.is(expiryFrom('', from), undefined);
  t.is(expiryFrom('  ', from), undefined);
  t.true(parseExpiry('').isEmpty);
  t.is(parseExpiry('').apply(from), undefined);
});

test('each expiry unit alone', (t) => {
  t.deepEqual(expiryFrom('30M', from), at(2024, 1, 10, 12, 30));
  t.deepEqual(expiryFrom('5H', from), at(2024, 1, 10, 17, 0));
  t.deepEqual(expiryFrom('36H', from), at(2024, 1, 12, 0, 0));
  t.deepEqual(expiryFrom('3d', from), at(2024, 1, 13, 12, 0));
  t.deepEqual(expiryFrom('2w', from), at(2024, 1, 24, 12, 0));
  t.deepEqual(expiryFrom('1m', from), at(2024, 2, 10, 12, 0));
  t.deepEqual(expiryFrom('14m', from), at(2025, 3, 10, 12, 0));
  t.deepEqual(expiryFrom('1y', from), at(2025, 1, 10, 12, 0));
  t.deepEqual(expiryFrom('0d', from), from, 'zero expires at once');
  t.deepEqual(parseExpiry('3d 2H').parts, { M: 0, H: 2, d: 3, w: 0, m: 0, y: 0 });
});

test('expiry units combine in any order', (t) => {
  const expected = at(2030, 7, 11, 14, 1); // 2030-06-10 + 3d + 4w, then +2H +1M
  t.deepEqual(expiryFrom('1M 2H 3d 4w 5m 6y', from), expected);
  t.deepEqual(expiryFrom('6y 4w 1M 5m 3d 2H', from), expected);
  t.deepEqual(expiryFrom('  3d\t  2H  ', from), at(2024, 1, 13, 14, 0), 'repeated whitespace is fine');
  t.deepEqual(expiryFrom('1d 1M', from), at(2024, 1, 11, 12, 1));
});

test('month and year steps clamp to the end of shorter months', (t) => {
  t.deepEqual(expiryFrom('1m', at(2024, 1, 31, 8)), at(2024, 2, 29, 8));
  t.deepEqual(expiryFrom('1m', at(2023, 1, 31, 8)), at(2023, 2, 28, 8));
  t.deepEqual(expiryFrom('1m', at(2024, 3, 31)), at(2024, 4, 30));
  t.deepEqual(expiryFrom('6m', at(2024, 8, 31)), at(2025, 2, 28));
  t.deepEqual(expiryFrom('1m', at(2024, 12, 31)), at(2025, 1, 31));
  t.deepEqual(expiryFrom('1y', at(2024, 2, 29)), at(2025, 2, 28));
  t.deepEqual(expiryFrom('4y', at(2024, 2, 29)), at(2028, 2, 29));
  t.deepEqual(expiryFrom('1m 1d', at(2024, 1, 31)), at(2024, 3, 1), 'days are added after the month step');
  t.deepEqual(expiryFrom('1y 1m', at(2024, 1, 31)), at(2025, 2, 28));
});

test('bad expiry expressions are refused with a clear message', (t) => {
  const cases: [string, RegExp][] = [
    ['1x', /bad term "1x": expected <number><unit> with unit one of M \(minutes\)/],
    ['abc', /bad term "abc"/],
    ['d', /bad term "d"/],
    ['1.5d', /bad term "1.5d"/],
    ['1 d', /bad term "1"/],
    ['-1d', /bad term "-1d": amounts cannot be negative/],
    ['1D', /bad term "1D"/],
    ['1d 2d', /days \(d\) given more than once/],
    ['0d 1d', /more than once/],
    ['99999999999y', /too far in the future/],
    ['99999999999999999999M', /too large/],
  ];
  for (const [value, re] of cases) {
    const err = t.throws(() => parseExpiry(value), undefined, value);
    t.regex(err!.message, re, value);
  }
  const err = t.throws(() => expiryFrom('1x', from));
  t.true(isApiError(err) && err.status === 400);
});

// --- pattern and names ---

const now = at(2024, 3, 5, 7, 8, 9);

test('%d takes the index after the highest one in use', (t) => {
  t.is(nextSnapshotName('snap%d', [], now), 'snap0');
  t.is(nextSnapshotName('', [], now), 'snap0', 'empty means the default pattern');
  t.is(nextSnapshotName('snap%d', ['snap0', 'snap1'], now), 'snap2');
  t.is(nextSnapshotName('snap%d', ['snap0', 'snap2'], now), 'snap3', 'gaps are not reused by default');
  t.is(nextSnapshotName('snap%d', ['snap1', 'snap3'], now, { fillGaps: true }), 'snap0');
  t.is(nextSnapshotName('snap%d', ['snap0', 'snap2'], now, { fillGaps: true }), 'snap1');
  t.is(nextSnapshotName('snap%d', ['foo', 'snapx', 'snap7x', 'snap-1', 'mysnap4'], now), 'snap0', 'only exact matches count');
  t.is(nextSnapshotName('snap%d', ['snap01'], now), 'snap2', 'snap01 reads as index 1');
  t.is(nextSnapshotName('backup-%d.daily', ['backup-4.daily', 'backup-4xdaily', 'backup-9'], now), 'backup-5.daily');
  t.is(nextSnapshotName('%d', ['0', '1'], now), '2');
});

test('a pattern without %d is used as is, then with -%d appended', (t) => {
  t.is(nextSnapshotName('nightly', [], now), 'nightly');
  t.is(nextSnapshotName('nightly', ['nightly'], now), 'nightly-0');
  t.is(nextSnapshotName('nightly', ['nightly', 'nightly-0'], now), 'nightly-1');
  t.is(nextSnapshotName('nightly', ['nightly', 'nightly-0', 'nightly-3'], now), 'nightly-4');
  t.is(nextSnapshotName('nightly', ['nightly', 'nightly-0', 'nightly-3'], now, { fillGaps: true }), 'nightly-1');
  t.is(nextSnapshotName('nightly', ['nightly-0'], now), 'nightly', 'only when the plain name is taken');
});

test('creation_date templates are rendered with Go layouts', (t) => {
  t.is(nextSnapshotName("{{ creation_date|date:'2006-01-02_15-04-05' }}", [], now), '2024-03-05_07-08-09');
  t.is(nextSnapshotName('snap-{{creation_date|date:"20060102"}}-%d', ['snap-20240305-0'], now), 'snap-20240305-1');
  t.is(nextSnapshotName("auto-{{ creation_date|date:'2006-01-02' }}", ['auto-2024-03-05'], now), 'auto-2024-03-05-0');
  const d = at(2024, 3, 5, 15, 8, 9, 42);
  t.is(formatGoTime('Jan 2 06 3:04:05PM Monday January', d), 'Mar 5 24 3:08:09PM Tuesday March');
  t.is(formatGoTime('2006-01-02T15:04:05.000', d), '2024-03-05T15:08:09.042');
  t.is(formatGoTime('05.999|05.000000', at(2024, 3, 5, 0, 0, 1)), '01|01.000000');
  t.is(formatGoTime('_2|02|002|pm|03', at(2024, 3, 5, 9)), ' 5|05|065|am|09');
  t.is(formatGoTime('15h04 and 1/2 7', at(2024, 11, 1, 0, 5)), '00h05 and 11/1 7', 'plain digits stay');
});

test('bad patterns and names from patterns are 400 errors', (t) => {
  const cases: [string, RegExp][] = [
    ['snap%d-%d', /may contain "%d" only once/],
    ['{{ foo }}', /unsupported template at "\{\{ foo \}\}"/],
    ["{{ creation_date|date:'2006-01-02 15:04' }}", /Invalid snapshot name "2024-03-05 07:08".*spaces/],
    ['a/%d', /Invalid snapshot name "a\/0".*"\/"/],
    ['..', /Invalid snapshot name "\.\.".*reserved/],
  ];
  for (const [pattern, re] of cases) {
    const err = t.throws(() => nextSnapshotName(pattern, [], now), undefined, pattern);
    t.true(isApiError(err) && err.status === 400, pattern);
    t.regex(err!.message, re, pattern);
  }
  t.throws(() => validateSnapshotPattern('x%d%d'), { message: /only once/ });
  t.throws(() => validateSnapshotPattern('{% if x %}'), { message: /unsupported template/ });
  t.notThrows(() => validateSnapshotPattern('snap%d'));
  t.notThrows(() => validateSnapshotPattern("{{ creation_date|date:'2006-01-02' }}-%d"));
});

test('snapshot names', (t) => {
  for (const ok of ['snap0', 'my.snap-1_x', 'café', 'a'.repeat(200), '...']) t.notThrows(() => checkSnapshotName(ok), ok);
  const cases: [string, RegExp][] = [
    ['', /^Invalid snapshot name "": cannot be empty$/],
    ['a/b', /^Invalid snapshot name "a\/b": cannot contain "\/"$/],
    ['.', /"\." and "\.\." are reserved/],
    ['..', /reserved/],
    ['a b', /cannot contain spaces or control characters/],
    ['a\tb', /control characters/],
    ['a\u0000b', /control characters/],
    ['x'.repeat(256), /longer than 255 bytes/],
  ];
  for (const [name, re] of cases) {
    const err = t.throws(() => checkSnapshotName(name), undefined, JSON.stringify(name));
    t.true(isApiError(err) && err.status === 400);
    t.regex(err!.message, re);
  }
});

// --- keys ---

test('snapshot config keys', (t) => {
  const byKey = Object.fromEntries(SNAPSHOT_KEYS.map((k) => [k.key, k]));
  t.deepEqual(Object.keys(byKey).sort(), ['snapshots.expiry', 'snapshots.pattern', 'snapshots.schedule', 'snapshots.schedule.stopped']);
  for (const k of SNAPSHOT_KEYS) {
    t.is(k.scope, 'instance');
    t.true(k.live);
  }
  t.is(byKey['snapshots.schedule']!.extension, 'snapshot_scheduling');
  t.is(byKey['snapshots.schedule.stopped']!.extension, 'snapshot_scheduling');
  t.is(byKey['snapshots.pattern']!.extension, 'snapshot_scheduling');
  t.is(byKey['snapshots.expiry']!.extension, 'snapshot_expiry');
  t.is(byKey['snapshots.pattern']!.default, 'snap%d');
  t.is(byKey['snapshots.schedule.stopped']!.default, 'false');
  const v = (key: string, value: string) => () => byKey[key]!.validate!(value);
  t.notThrows(v('snapshots.schedule', '@startup, */5 * * * *'));
  t.throws(v('snapshots.schedule', '60 * * * *'), { message: /out of range/ });
  t.notThrows(v('snapshots.schedule.stopped', 'true'));
  t.throws(v('snapshots.schedule.stopped', 'maybe'));
  t.notThrows(v('snapshots.expiry', '2w 1d'));
  t.throws(v('snapshots.expiry', '2q'), { message: /bad term "2q"/ });
  t.notThrows(v('snapshots.pattern', 'daily-%d'));
  t.throws(v('snapshots.pattern', '%d%d'), { message: /only once/ });
});
