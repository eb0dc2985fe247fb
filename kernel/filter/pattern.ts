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
 * Bound on the instructions a value may compile to. RE2 refuses only past ~1.4 million, which
 * re2js needs seconds to build (`x{2,1000}` repeated); real filters need a few hundred.
 */
export const MAX_PATTERN_SIZE = 20_000;

let engine: typeof RE2JSClass | undefined;
function re2(): typeof RE2JSClass {
  engine ??= (createRequire(import.meta.url)('re2js') as { RE2JS: typeof RE2JSClass }).RE2JS;
  return engine;
}

export function valueMatcher(value: string): ValueMatcher {
  // An ASCII word: case-insensitive equality is exactly what the anchored pattern would do,
  // except that RE2's case folding also pairs `k` with KELVIN SIGN and `s` with LONG S, so
  // text outside ASCII still goes to the engine.
  if (!RE2_META.test(value) && ASCII.test(value)) {
    const lower = value.toLowerCase();
    let full: ValueMatcher | undefined;
    return (text) => (ASCII.test(text) ? text.toLowerCase() === lower : (full ??= compile(value))(text));
  }
  return compile(value);
}

function compile(value: string): ValueMatcher {
  const source = value.includes('^') || value.includes('$') ? value : `^${value}$`;
  const size = estimatedSize(source);
  if (size > MAX_PATTERN_SIZE) {
    throw new FilterSyntaxError(`The pattern "${value.length > 64 ? `${value.slice(0, 64)}…` : value}" is too large (about ${size} instructions, at most ${MAX_PATTERN_SIZE})`);
  }
  const RE2JS = re2();
  let pattern: RE2JSClass;
  try {
    pattern = RE2JS.compile(`(?i)${source}`);
  } catch {
    // Not a valid RE2 pattern: the reference then compares the value as text, folding case.
    pattern = RE2JS.compile(`(?i)^${RE2JS.quote(value)}$`);
  }
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
      if (repeat) {
        const min = Number(repeat[1]);
        const max = repeat[2] === undefined ? min : repeat[3] ? Number(repeat[3]) : min + 1;
        const copies = Math.min(Math.max(min, max), 1_000_000);
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
