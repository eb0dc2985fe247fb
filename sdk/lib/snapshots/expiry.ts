/**
 * `snapshots.expiry`: space-separated terms `<n><unit>`, units M (minutes), H (hours), d (days),
 * w (weeks), m (months), y (years), each at most once, in any order. Empty means never.
 */
import { badRequest } from '../../errors.js';

export type ExpiryUnit = 'M' | 'H' | 'd' | 'w' | 'm' | 'y';

const UNIT_NAMES: Readonly<Record<ExpiryUnit, string>> = {
  M: 'minutes', H: 'hours', d: 'days', w: 'weeks', m: 'months', y: 'years',
};

const TERM = /^(\d+)([MHdwmy])$/;

export interface ExpiryExpression {
  /** The amount given for each unit (0 when absent). */
  readonly parts: Readonly<Record<ExpiryUnit, number>>;
  /** No terms: snapshots never expire. */
  readonly isEmpty: boolean;
  /** When a snapshot taken at `from` expires; undefined means never. */
  apply(from: Date): Date | undefined;
}

const UNIT_HELP = Object.entries(UNIT_NAMES).map(([u, n]) => `${u} (${n})`).join(', ');

/** Parses an expiry expression; throws an Error naming the bad term. */
export function parseExpiry(expr: string): ExpiryExpression {
  const parts: Record<ExpiryUnit, number> = { M: 0, H: 0, d: 0, w: 0, m: 0, y: 0 };
  const seen = new Set<ExpiryUnit>();
  const terms = expr.trim() === '' ? [] : expr.trim().split(/\s+/);
  for (const term of terms) {
    const m = TERM.exec(term);
    if (!m) {
      const why = term.startsWith('-') ? 'amounts cannot be negative' : `expected <number><unit> with unit one of ${UNIT_HELP}`;
      throw new Error(`Invalid expiry expression "${expr}": bad term "${term}": ${why}`);
    }
    const unit = m[2] as ExpiryUnit;
    if (seen.has(unit)) throw new Error(`Invalid expiry expression "${expr}": ${UNIT_NAMES[unit]} (${unit}) given more than once`);
    seen.add(unit);
    const n = Number(m[1]);
    if (!Number.isSafeInteger(n)) throw new Error(`Invalid expiry expression "${expr}": "${term}" is too large`);
    parts[unit] = n;
  }
  const expiry: ExpiryExpression = {
    parts,
    isEmpty: terms.length === 0,
    apply: (from) => (terms.length === 0 ? undefined : addParts(from, parts)),
  };
  // Catch amounts beyond what a date can hold now rather than when the first snapshot is taken.
  if (terms.length > 0 && Number.isNaN(addParts(new Date(), parts).getTime())) {
    throw new Error(`Invalid expiry expression "${expr}": too far in the future`);
  }
  return expiry;
}

/**
 * When a snapshot taken at `from` expires under `expr`; undefined means never. A bad expression is
 * a 400 ApiError here: it reaches snapshot creation only from stored config or a request.
 */
export function expiryFrom(expr: string, from: Date): Date | undefined {
  let at: Date | undefined;
  try {
    at = parseExpiry(expr).apply(from);
  } catch (err) {
    throw badRequest((err as Error).message);
  }
  if (at && Number.isNaN(at.getTime())) throw badRequest(`Invalid expiry expression "${expr}": too far in the future`);
  return at;
}

/** Validator for the `snapshots.expiry` config key. */
export const validateExpiry = (value: string): void => {
  parseExpiry(value);
};

/**
 * Calendar units go first, in local time, then hours and minutes as elapsed time (the reference's
 * order). Unlike the reference, a month step that lands past the end of the target month is clamped
 * to its last day (Jan 31 + 1m = Feb 28/29) instead of overflowing into the next month.
 */
function addParts(from: Date, p: Readonly<Record<ExpiryUnit, number>>): Date {
  const d = new Date(from.getTime());
  if (p.y || p.m) {
    const day = d.getDate();
    d.setDate(1);
    d.setFullYear(d.getFullYear() + p.y, d.getMonth() + p.m);
    const last = new Date(d.getFullYear(), d.getMonth() + 1, 0).getDate();
    d.setDate(Math.min(day, last));
  }
  if (p.d || p.w) d.setDate(d.getDate() + p.d + 7 * p.w);
  return new Date(d.getTime() + (p.H * 60 + p.M) * 60_000);
}
