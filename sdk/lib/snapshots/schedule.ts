/**
 * `snapshots.schedule`: a comma-separated list of entries, each a 5-field cron expression
 * (`<minute> <hour> <day-of-month> <month> <day-of-week>`) or an alias (`@hourly`, `@daily`,
 * `@midnight`, `@weekly`, `@monthly`, `@annually`, `@yearly`, `@never`, and `@startup` for instances).
 *
 * Times are the host's local time (as the reference daemon does), at minute resolution.
 */
import { createHash } from 'node:crypto';

/**
 * Aliases and the cron expression each stands for, with `M` and `H` standing for the minute and
 * hour spread per subject (see `spreadFor`), so that a host's instances do not all snapshot at
 * once. `@never` stands for no time at all; `@startup` is handled apart (it has no time).
 */
const ALIASES: Readonly<Record<string, string>> = {
  '@hourly': 'M * * * *',
  '@daily': 'M H * * *',
  '@midnight': 'M 0 * * *',
  '@weekly': 'M H * * 0',
  '@monthly': 'M H 1 * *',
  '@annually': 'M H 1 1 *',
  '@yearly': 'M H 1 1 *',
  '@never': '',
};

export const STARTUP_ALIAS = '@startup';
export const SCHEDULE_ALIASES: readonly string[] = [...Object.keys(ALIASES), STARTUP_ALIAS];

export interface ScheduleOptions {
  /** `@startup` is meaningful for instances only (custom volumes never "start"). */
  allowStartup: boolean;
  /**
   * What the schedule belongs to (e.g. `<project>/<instance>`): the aliases' minute and hour are
   * derived from it. Without it they fall on minute 0 of hour 0.
   */
  subject?: string;
}

/** The minute (0-59) and hour (0-23) an alias falls on for `subject`: stable, and spread across subjects. */
export function spreadFor(subject: string | undefined): { minute: number; hour: number } {
  if (subject === undefined) return { minute: 0, hour: 0 };
  const digest = createHash('sha256').update(subject).digest();
  return { minute: digest.readUInt32BE(0) % 60, hour: digest.readUInt32BE(4) % 24 };
}

export interface Schedule {
  /** The entries as written (trimmed), after splitting the value. */
  readonly entries: readonly string[];
  /** `@startup` was given: snapshot when the instance starts. */
  readonly onStartup: boolean;
  /** Nothing is scheduled at all (empty value). */
  readonly isEmpty: boolean;
  /** Whether a snapshot is due in the minute that contains `date` (seconds are ignored). */
  matches(date: Date): boolean;
  /** The first due minute strictly after `after`, or undefined when no time entry can ever match. */
  next(after: Date): Date | undefined;
}

interface FieldSpec {
  name: string;
  min: number;
  max: number;
  names?: readonly string[];
  /** Index of names[0] (months count from 1, weekdays from 0). */
  namesBase?: number;
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

const FIELDS: readonly FieldSpec[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: MONTHS, namesBase: 1 },
  // 7 is accepted as Sunday like most crons; it is folded onto 0 after expansion.
  { name: 'day-of-week', min: 0, max: 7, names: WEEKDAYS, namesBase: 0 },
];

interface CronField {
  values: Set<number>;
  /** Written as a bare `*` / `?`: matters for the day-of-month / day-of-week OR rule. */
  star: boolean;
}

interface CronSpec {
  minute: CronField;
  hour: CronField;
  dom: CronField;
  month: CronField;
  dow: CronField;
}

/**
 * Splits a value into entries. The reference splits on ", " only, so a cron list such as
 * `0 0 1,15 * *` stays whole. We accept that, and also a bare "," between entries when that is
 * unambiguous: next to an alias (`@hourly,@daily`), or between two complete 5-field expressions
 * (`0 0 * * 1,0 12 * * 5`). Any other bare "," continues the current cron field list.
 */
export function splitScheduleEntries(value: string): string[] {
  const entries: string[] = [];
  const pieces = value.split(',');
  for (let i = 0; i < pieces.length; i++) {
    const raw = pieces[i]!;
    const piece = raw.trim();
    const prev = entries.at(-1);
    const continuesList =
      prev !== undefined &&
      !/^\s/.test(raw) &&
      piece !== '' &&
      !piece.startsWith('@') &&
      !prev.startsWith('@') &&
      !(fieldCount(prev) >= 5 && fieldCount(piece) >= 5);
    if (continuesList) entries[entries.length - 1] = `${prev},${piece}`;
    else entries.push(piece);
  }
  return entries;
}

const fieldCount = (s: string) => (s.trim() === '' ? 0 : s.trim().split(/\s+/).length);

/** Parses a `snapshots.schedule` value; throws an Error naming the bad entry and field. */
export function parseSchedule(value: string, opts: ScheduleOptions): Schedule {
  const specs: CronSpec[] = [];
  let onStartup = false;
  const entries = value.trim() === '' ? [] : splitScheduleEntries(value);
  for (const entry of entries) {
    if (entry === '') throw new Error(`Invalid schedule "${value}": empty entry (entries are separated by ", ")`);
    if (entry.startsWith('@')) {
      if (entry.toLowerCase() === STARTUP_ALIAS) {
        if (!opts.allowStartup) throw new Error(`Invalid schedule entry "${entry}": @startup is only allowed for instances`);
        onStartup = true;
        continue;
      }
      // Aliases are matched whatever their case, as the reference does.
      const template = ALIASES[entry.toLowerCase()];
      if (template === undefined) {
        const known = SCHEDULE_ALIASES.filter((a) => opts.allowStartup || a !== STARTUP_ALIAS).join(', ');
        throw new Error(`Invalid schedule entry "${entry}": unknown alias (known: ${known})`);
      }
      if (template === '') continue;
      const { minute, hour } = spreadFor(opts.subject);
      specs.push(parseCron(template.replace('M', String(minute)).replace('H', String(hour)), entry));
      continue;
    }
    specs.push(parseCron(entry, entry));
  }
  return new ParsedSchedule(entries, specs, onStartup);
}

function parseCron(expr: string, entry: string): CronSpec {
  const parts = expr.trim().split(/\s+/);
  if (parts.length !== 5) {
    throw new Error(`Invalid schedule entry "${entry}": expected 5 fields <minute> <hour> <day-of-month> <month> <day-of-week>, got ${parts.length}`);
  }
  const [minute, hour, dom, month, dow] = parts.map((p, i) => {
    try {
      return parseField(p, FIELDS[i]!);
    } catch (err) {
      throw new Error(`Invalid schedule entry "${entry}": ${FIELDS[i]!.name} field "${p}": ${(err as Error).message}`);
    }
  }) as [CronField, CronField, CronField, CronField, CronField];
  // Fold Sunday-as-7 onto 0 so matching only deals with Date.getDay().
  if (dow.values.delete(7)) dow.values.add(0);
  return { minute, hour, dom, month, dow };
}

function parseField(text: string, spec: FieldSpec): CronField {
  const values = new Set<number>();
  // Only a bare wildcard counts as unrestricted (as the reference's cron library does: `*/2` restricts).
  const star = text === '*' || text === '?' || text === '*/1' || text === '?/1';
  for (const item of text.split(',')) {
    if (item === '') throw new Error('empty list item');
    const slash = item.split('/');
    if (slash.length > 2) throw new Error(`"${item}" has more than one "/"`);
    const [range, stepText] = slash as [string, string | undefined];
    let step = 1;
    if (stepText !== undefined) {
      if (!/^\d+$/.test(stepText) || Number(stepText) === 0) throw new Error(`step "${stepText}" must be a positive integer`);
      step = Number(stepText);
    }
    // Open-ended weekday ranges stop at 6: 7 is only another spelling of Sunday.
    const top = spec.name === 'day-of-week' ? 6 : spec.max;
    let lo: number;
    let hi: number;
    if (range === '*' || range === '?') {
      if (range === '?' && !spec.name.startsWith('day-')) throw new Error('"?" is only allowed in the day fields');
      lo = spec.min;
      hi = top;
    } else {
      const dash = range.split('-');
      if (dash.length > 2) throw new Error(`"${range}" is not a value or a range a-b`);
      lo = parseValue(dash[0]!, spec);
      // `a/n` means a through the maximum, stepping n (as the reference's cron library reads it).
      hi = dash.length === 2 ? parseValue(dash[1]!, spec) : stepText !== undefined ? top : lo;
      if (lo > hi) throw new Error(`range start ${dash[0]} is after its end ${dash[1]}`);
    }
    for (let v = lo; v <= hi; v += step) values.add(v);
  }
  return { values, star };
}

function parseValue(text: string, spec: FieldSpec): number {
  if (/^\d+$/.test(text)) {
    const n = Number(text);
    if (n < spec.min || n > spec.max) throw new Error(`${n} is out of range ${spec.min}-${spec.max}`);
    return n;
  }
  const idx = spec.names?.indexOf(text.toLowerCase()) ?? -1;
  if (idx >= 0) return idx + spec.namesBase!;
  if (text === '') throw new Error('missing value');
  throw new Error(spec.names ? `"${text}" is neither a number nor a ${spec.name === 'month' ? 'month name (jan-dec)' : 'day name (sun-sat)'}` : `"${text}" is not a number`);
}

function dayMatches(spec: CronSpec, date: Date): boolean {
  if (!spec.month.values.has(date.getMonth() + 1)) return false;
  const dom = spec.dom.values.has(date.getDate());
  const dow = spec.dow.values.has(date.getDay());
  // Standard cron: with both day fields restricted, either one is enough.
  return spec.dom.star || spec.dow.star ? dom && dow : dom || dow;
}

const cronMatches = (spec: CronSpec, date: Date) =>
  spec.minute.values.has(date.getMinutes()) && spec.hour.values.has(date.getHours()) && dayMatches(spec, date);

/** The longest gap between satisfiable days is Feb 29 across a skipped leap year (8 years). */
const SEARCH_DAYS = 366 * 9;

function nextCron(spec: CronSpec, after: Date): Date | undefined {
  const hours = [...spec.hour.values].sort((a, b) => a - b);
  const minutes = [...spec.minute.values].sort((a, b) => a - b);
  const y = after.getFullYear();
  const m = after.getMonth();
  const d = after.getDate();
  for (let i = 0; i < SEARCH_DAYS; i++) {
    const day = new Date(y, m, d + i);
    if (!dayMatches(spec, day)) continue;
    for (const h of hours) {
      for (const min of minutes) {
        const candidate = new Date(day.getFullYear(), day.getMonth(), day.getDate(), h, min);
        // Re-check: in a DST gap the wall-clock time does not exist and Date shifts it.
        if (candidate.getTime() > after.getTime() && cronMatches(spec, candidate)) return candidate;
      }
    }
  }
  return undefined;
}

class ParsedSchedule implements Schedule {
  readonly isEmpty: boolean;
  constructor(
    readonly entries: readonly string[],
    private readonly specs: readonly CronSpec[],
    readonly onStartup: boolean,
  ) {
    this.isEmpty = specs.length === 0 && !onStartup;
  }

  matches(date: Date): boolean {
    return this.specs.some((s) => cronMatches(s, date));
  }

  next(after: Date): Date | undefined {
    // Minute resolution: anything within the minute of `after` counts as that minute.
    const floor = new Date(after.getTime());
    floor.setSeconds(0, 0);
    let best: Date | undefined;
    for (const s of this.specs) {
      const n = nextCron(s, floor);
      if (n && (!best || n < best)) best = n;
    }
    return best;
  }
}

/** Validator for the `snapshots.schedule` config key. */
export const validateSchedule = (allowStartup: boolean) => (value: string): void => {
  parseSchedule(value, { allowStartup });
};
