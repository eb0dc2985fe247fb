/** Evaluates a parsed filter against an object as the API renders it. */
import type { FilterExpr } from './parse.js';

const snake = (name: string) => name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();

function findKey(obj: Record<string, unknown>, wanted: string): string | undefined {
  if (Object.prototype.hasOwnProperty.call(obj, wanted)) return wanted;
  const lower = wanted.toLowerCase();
  const snaked = snake(wanted);
  return Object.keys(obj).find((k) => k.toLowerCase() === lower || k === snaked);
}

/** Resolve a dotted path; map keys may themselves contain dots (`config.image.os`), so the longest key wins. */
function resolve(value: unknown, segments: string[]): unknown {
  if (segments.length === 0) return value;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const obj = value as Record<string, unknown>;
  for (let n = segments.length; n >= 1; n--) {
    const key = findKey(obj, segments.slice(0, n).join('.'));
    if (key !== undefined) {
      const found = resolve(obj[key], segments.slice(n));
      if (found !== undefined || n === segments.length) return found;
    }
  }
  return undefined;
}

function asText(value: unknown): string | undefined {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return undefined;
}

const regexCache = new Map<string, RegExp | null>();

function equals(actual: unknown, expected: string): boolean {
  const text = asText(actual);
  if (text === undefined) return false;
  // The reference matches values without regard to case (`status eq running` finds "Running").
  if (text.toLowerCase() === expected.toLowerCase()) return true;
  let re = regexCache.get(expected);
  if (re === undefined) {
    try {
      re = new RegExp(`^(?:${expected})$`, 'i');
    } catch {
      re = null;
    }
    if (regexCache.size < 1000) regexCache.set(expected, re);
  }
  return re !== null && re.test(text);
}

export function matchesFilter(expr: FilterExpr, obj: unknown): boolean {
  switch (expr.kind) {
    case 'clause': {
      const eq = equals(resolve(obj, expr.field.split('.')), expr.value);
      return expr.op === 'eq' ? eq : !eq;
    }
    case 'not':
      return !matchesFilter(expr.expr, obj);
    case 'and':
      return matchesFilter(expr.left, obj) && matchesFilter(expr.right, obj);
    case 'or':
      return matchesFilter(expr.left, obj) || matchesFilter(expr.right, obj);
  }
}
