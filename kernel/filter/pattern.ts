/**
 * How a filter value matches a field, as the reference does it: the value is an RE2 regular
 * expression, case-insensitive, anchored at both ends only when it has no `^` or `$` of its own;
 * a value that does not compile is compared as plain text, still without regard to case.
 *
 * The engine is re2js, a pure-JS port of RE2 (the reference uses Go's regexp, same syntax and
 * linear-time matching), chosen over the native `re2` binding: no compiler at install time, and
 * the same semantics on every build. A backtracking engine (RegExp) would let one `(a+)+` stall
 * the whole daemon. The engine is loaded on the first value that needs it, so daemons whose
 * clients filter on plain names never pay for it.
 */
import { createRequire } from 'node:module';
import type { RE2JS as RE2JSClass } from 're2js';
import { FilterSyntaxError } from './parse.js';

export type ValueMatcher = (text: string) => boolean;

/** Characters with a meaning in RE2 syntax; a value without them is a plain word. */
const RE2_META = /[\\.+*?()|[\]{}^$]/;
const ASCII = /^[\x00-\x7f]*$/;

/**
 * Bound on the instructions a value may compile to. Matching is linear in the text, but each
 * character costs up to the program's size once RE2's DFA cache gives up: near 1000 a 20 KB
 * field takes about a second at worst, at 4000 a 2 KB one already does (measured with re2js
 * here). RE2 itself refuses only past ~1.4 million. Real filters need a few hundred at most.
 */
export const MAX_PATTERN_SIZE = 1000;
/** Largest pattern compiled at all (to tell an invalid one, compared as text, from a valid one too large to use). */
const MAX_COMPILE_SIZE = 20_000;

let engine: typeof RE2JSClass | undefined;
function re2(): typeof RE2JSClass {
  engine ??= (createRequire(import.meta.url)('re2js') as { RE2JS: typeof RE2JSClass }).RE2JS;
  return engine;
}

export function valueMatcher(value: string): ValueMatcher {
  return RE2_META.test(value) ? patternMatcher(value) : textMatcher(value);
}

/**
 * A value compared as text, folding case as RE2 does: what a plain word anchored at both ends
 * means, and what the reference falls back to for a value that is no valid pattern. ASCII on
 * both sides is plain lower-casing; RE2 also pairs `k` with KELVIN SIGN and `s` with LONG S, so
 * anything else goes to the engine (a quoted literal: linear, whatever its length).
 */
function textMatcher(value: string): ValueMatcher {
  const asciiValue = ASCII.test(value);
  const lower = value.toLowerCase();
  let folded: RE2JSClass | undefined;
  return (text) => {
    if (asciiValue && ASCII.test(text)) return text.toLowerCase() === lower;
    folded ??= re2().compile(`(?i)^${re2().quote(value)}$`);
    return folded.test(text);
  };
}

function patternMatcher(value: string): ValueMatcher {
  const source = value.includes('^') || value.includes('$') ? value : `^${value}$`;
  const size = estimatedSize(source);
  const tooLarge = () => new FilterSyntaxError(`The pattern "${value.length > 64 ? `${value.slice(0, 64)}…` : value}" is too large (about ${size} instructions, at most ${MAX_PATTERN_SIZE})`);
  // Past what compiles in a few tens of milliseconds, not even its validity is worth learning.
  if (size > MAX_COMPILE_SIZE) throw tooLarge();
  let pattern: RE2JSClass;
  try {
    pattern = re2().compile(`(?i)${source}`);
  } catch {
    // Not a valid RE2 pattern: the reference then compares the value as text.
    return textMatcher(value);
  }
  if (size > MAX_PATTERN_SIZE) throw tooLarge();
  return (text) => pattern.test(text);
}

/**
 * An upper estimate of the program a pattern compiles to, read from its text: every atom costs
 * one instruction and a counted repeat `{n,m}` copies what it applies to up to max(n, m) times.
 * It errs on the large side (quantifier characters inside groups' flag prefixes count as
 * atoms); RE2 itself still judges validity.
 */
export function estimatedSize(pattern: string): number {
  const frames: { total: number; last: number }[] = [{ total: 0, last: 0 }];
  const top = () => frames[frames.length - 1]!;
  const atom = (size: number) => {
    top().total += size;
    top().last = size;
  };
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i]!;
    if (c === '\\') {
      if (pattern[i + 1] === 'Q') {
        // \Q…\E quotes everything up to \E (or the end) as literal characters.
        const end = pattern.indexOf('\\E', i + 2);
        const stop = end < 0 ? pattern.length : end;
        for (let k = i + 2; k < stop; k++) atom(1);
        i = end < 0 ? pattern.length : end + 2;
        continue;
      }
      atom(1);
      i += 2;
      continue;
    }
    if (c === '[') {
      i = classEnd(pattern, i);
      atom(1);
      continue;
    }
    if (c === '(') {
      frames.push({ total: 0, last: 0 });
      i++;
      continue;
    }
    if (c === ')' && frames.length > 1) {
      const group = frames.pop()!;
      atom(group.total + 2);
      i++;
      continue;
    }
    if (c === '{') {
      const repeat = /^\{(\d+)(?:(,)(\d*))?\}/.exec(pattern.slice(i, i + 24));
      const min = repeat ? Number(repeat[1]) : 0;
      const unbounded = repeat?.[2] !== undefined && !repeat[3];
      const max = !repeat ? 0 : repeat[2] === undefined ? min : unbounded ? min : Number(repeat[3]);
      // RE2 refuses counts over 1000: such a value is compared as text, so it costs what its characters do.
      if (repeat && min <= 1000 && max <= 1000) {
        const copies = Math.max(min, max) + (unbounded ? 1 : 0);
        const repeated = top().last;
        top().total += repeated * Math.max(copies - 1, 0) + copies;
        top().last = repeated * copies + copies;
        i += repeat[0].length;
        continue;
      }
    }
    atom(1);
    i++;
  }
  while (frames.length > 1) {
    const group = frames.pop()!;
    atom(group.total + 2);
  }
  return top().total;
}

/** Index just past a character class starting at `start` (`[`), or the end of the pattern. */
function classEnd(pattern: string, start: number): number {
  let i = start + 1;
  if (pattern[i] === '^') i++;
  if (pattern[i] === ']') i++;
  while (i < pattern.length && pattern[i] !== ']') {
    if (pattern[i] === '\\') i += 2;
    else if (pattern.startsWith('[:', i)) {
      const close = pattern.indexOf(':]', i + 2);
      i = close < 0 ? i + 1 : close + 2;
    } else i++;
  }
  return Math.min(i + 1, pattern.length);
}
