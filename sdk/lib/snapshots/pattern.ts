/**
 * Snapshot naming: `snapshots.pattern` (default `snap%d`) and the rules for snapshot names.
 *
 * A pattern is first rendered as a template (only `{{ creation_date|date:'<Go layout>' }}` is
 * understood, the form users write), then `%d` is replaced by an index.
 */
import { badRequest } from '../../errors.js';

export const DEFAULT_SNAPSHOT_PATTERN = 'snap%d';

export interface NextNameOptions {
  /**
   * false (default, as the reference): one more than the highest index in use, so names keep
   * growing in creation order even after deletions. true: the lowest free index.
   */
  fillGaps?: boolean;
}

/** Why a snapshot name is refused, or undefined when it is fine. */
export function snapshotNameProblem(name: string): string | undefined {
  if (name === '') return 'cannot be empty';
  if (name.includes('/')) return 'cannot contain "/"';
  // The reference refuses spaces; other whitespace and control characters are no better in paths and URLs.
  if (/[\s\p{Cc}]/u.test(name)) return 'cannot contain spaces or control characters';
  if (name === '.' || name === '..') return '"." and ".." are reserved';
  // The name becomes a directory name on disk.
  if (Buffer.byteLength(name, 'utf8') > 255) return 'cannot be longer than 255 bytes';
  return undefined;
}

/** Throws a 400 ApiError when `name` is not a valid snapshot name (the part after `<instance>/`). */
export function checkSnapshotName(name: string): void {
  const problem = snapshotNameProblem(name);
  if (problem) throw badRequest(`Invalid snapshot name "${name}": ${problem}`);
}

const TEMPLATE = /\{\{\s*creation_date\s*\|\s*date\s*:\s*(?:'([^']*)'|"([^"]*)")\s*\}\}/g;

/** Renders the template part of a pattern at `now`; throws an Error for template syntax it does not know. */
export function renderSnapshotPattern(pattern: string, now: Date): string {
  const out = pattern.replace(TEMPLATE, (_m, single: string | undefined, double: string | undefined) =>
    formatGoTime(single ?? double ?? '', now));
  const leftover = /\{\{|\{%|\{#/.exec(out);
  if (leftover) {
    throw new Error(`Invalid snapshot pattern "${pattern}": unsupported template at "${out.slice(leftover.index, leftover.index + 40)}" (only {{ creation_date|date:'<layout>' }} is understood)`);
  }
  return out;
}

/** Validator for the `snapshots.pattern` config key: template syntax and at most one `%d`. */
export const validateSnapshotPattern = (value: string): void => {
  const rendered = renderSnapshotPattern(value, new Date());
  if (rendered.split('%d').length > 2) throw new Error(`Invalid snapshot pattern "${value}": may contain "%d" only once`);
};

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The index `%d` takes: see NextNameOptions. `withIndex` is a rendered pattern with exactly one `%d`. */
function nextIndex(withIndex: string, existing: readonly string[], fillGaps: boolean): number {
  const [before, after] = withIndex.split('%d') as [string, string];
  // Exact matches only (the reference's scanf also takes "snap3x" as index 3).
  const re = new RegExp(`^${escapeRe(before)}(\\d+)${escapeRe(after)}$`);
  const used = new Set<number>();
  for (const name of existing) {
    const m = re.exec(name);
    if (m) used.add(Number(m[1]));
  }
  if (fillGaps) {
    let i = 0;
    while (used.has(i) || existing.includes(`${before}${i}${after}`)) i++;
    return i;
  }
  let max = -1;
  for (const n of used) if (n > max) max = n;
  let i = max + 1;
  // Guards against names like "snap01" that parse to an index but are not what we would produce.
  while (existing.includes(`${before}${i}${after}`)) i++;
  return i;
}

/**
 * The name for a new snapshot. An empty pattern means the default. With `%d` the index is chosen
 * among `existing`; without it the rendered pattern is used as is, and when that is taken `-%d`
 * is appended (`daily` taken gives `daily-0`, then `daily-1`, ...). Throws a 400 ApiError for a bad
 * pattern or when the result is not a valid snapshot name.
 */
export function nextSnapshotName(pattern: string, existing: readonly string[], now: Date, opts: NextNameOptions = {}): string {
  const source = pattern === '' ? DEFAULT_SNAPSHOT_PATTERN : pattern;
  let rendered: string;
  try {
    rendered = renderSnapshotPattern(source, now);
  } catch (err) {
    throw badRequest((err as Error).message);
  }
  const count = rendered.split('%d').length - 1;
  if (count > 1) throw badRequest(`Invalid snapshot pattern "${source}": may contain "%d" only once`);
  let name: string;
  if (count === 1) {
    name = rendered.replace('%d', String(nextIndex(rendered, existing, !!opts.fillGaps)));
  } else if (existing.includes(rendered)) {
    const withIndex = `${rendered}-%d`;
    name = withIndex.replace('%d', String(nextIndex(withIndex, existing, !!opts.fillGaps)));
  } else {
    name = rendered;
  }
  const problem = snapshotNameProblem(name);
  if (problem) throw badRequest(`Invalid snapshot name "${name}" from pattern "${source}": ${problem}`);
  return name;
}

// --- Go time layouts (reference time Mon Jan 2 15:04:05 MST 2006) ---

const LONG_MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const LONG_DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

const pad = (n: number, width: number, fill = '0') => String(n).padStart(width, fill);

function zone(date: Date, colon: boolean, zForUtc: boolean, hoursOnly = false): string {
  const off = -date.getTimezoneOffset();
  if (zForUtc && off === 0) return 'Z';
  const sign = off < 0 ? '-' : '+';
  const a = Math.abs(off);
  const hh = pad(Math.floor(a / 60), 2);
  if (hoursOnly) return `${sign}${hh}`;
  return `${sign}${hh}${colon ? ':' : ''}${pad(a % 60, 2)}`;
}

/**
 * Tokens, longest first where one is a prefix of another, in the order Go's formatter tries them.
 * Each renders the date in local time.
 */
const GO_TOKENS: ReadonlyArray<[string, (d: Date) => string]> = [
  ['January', (d) => LONG_MONTHS[d.getMonth()]!],
  ['Jan', (d) => LONG_MONTHS[d.getMonth()]!.slice(0, 3)],
  ['Monday', (d) => LONG_DAYS[d.getDay()]!],
  ['Mon', (d) => LONG_DAYS[d.getDay()]!.slice(0, 3)],
  ['MST', (d) => zoneName(d)],
  ['2006', (d) => pad(d.getFullYear(), 4)],
  ['_2006', (d) => `_${pad(d.getFullYear(), 4)}`],
  ['002', (d) => pad(dayOfYear(d), 3)],
  ['__2', (d) => pad(dayOfYear(d), 3, ' ')],
  ['01', (d) => pad(d.getMonth() + 1, 2)],
  ['02', (d) => pad(d.getDate(), 2)],
  ['03', (d) => pad(hour12(d), 2)],
  ['04', (d) => pad(d.getMinutes(), 2)],
  ['05', (d) => pad(d.getSeconds(), 2)],
  ['06', (d) => pad(d.getFullYear() % 100, 2)],
  ['_2', (d) => pad(d.getDate(), 2, ' ')],
  ['15', (d) => pad(d.getHours(), 2)],
  ['1', (d) => String(d.getMonth() + 1)],
  ['2', (d) => String(d.getDate())],
  ['3', (d) => String(hour12(d))],
  ['4', (d) => String(d.getMinutes())],
  ['5', (d) => String(d.getSeconds())],
  ['PM', (d) => (d.getHours() >= 12 ? 'PM' : 'AM')],
  ['pm', (d) => (d.getHours() >= 12 ? 'pm' : 'am')],
  ['-07:00', (d) => zone(d, true, false)],
  ['-0700', (d) => zone(d, false, false)],
  ['-07', (d) => zone(d, false, false, true)],
  ['Z07:00', (d) => zone(d, true, true)],
  ['Z0700', (d) => zone(d, false, true)],
  ['Z07', (d) => zone(d, false, true, true)],
];

/** The host's zone abbreviation when it has a plain one; otherwise Go's fallback, the -0700 form. */
function zoneName(d: Date): string {
  if (d.getTimezoneOffset() === 0) return 'UTC';
  const name = new Intl.DateTimeFormat('en-US', { timeZoneName: 'short' }).formatToParts(d).find((p) => p.type === 'timeZoneName')?.value;
  return name && /^[A-Z]{2,5}$/.test(name) ? name : zone(d, false, false);
}

const hour12 = (d: Date) => (d.getHours() % 12 === 0 ? 12 : d.getHours() % 12);

function dayOfYear(d: Date): number {
  const start = Date.UTC(d.getFullYear(), 0, 1);
  return Math.round((Date.UTC(d.getFullYear(), d.getMonth(), d.getDate()) - start) / 86_400_000) + 1;
}

/** Formats `date` (local time) with a Go reference-time layout such as `2006-01-02_15-04-05`. */
export function formatGoTime(layout: string, date: Date): string {
  let out = '';
  let i = 0;
  while (i < layout.length) {
    // Fractional seconds: ".000" / ",000" (fixed width) or ".999" (trailing zeros trimmed), when the run of 0s or 9s is not followed by another digit.
    const frac = /^[.,](0+|9+)(?!\d)/.exec(layout.slice(i));
    if (frac) {
      const digits = frac[1]!;
      const ms = pad(date.getMilliseconds(), 3).padEnd(digits.length, '0').slice(0, digits.length);
      const value = digits[0] === '9' ? ms.replace(/0+$/, '') : ms;
      out += value === '' ? '' : `${layout[i]}${value}`;
      i += frac[0].length;
      continue;
    }
    const tok = GO_TOKENS.find(([t]) => layout.startsWith(t, i));
    if (tok) {
      out += tok[1](date);
      i += tok[0].length;
    } else {
      out += layout[i];
      i++;
    }
  }
  return out;
}
