/** Evaluates a parsed filter against an object as the API renders it. */
import type { FilterExpr } from './parse.js';
import { valueMatcher } from './pattern.js';

const snake = (name: string) => name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();

/** A key a field path may name at one level, with the spellings it also answers to. */
interface KeyStep {
  exact: string;
  lower: string;
  snaked: string;
  /** Where the rest of the path starts. */
  next: number;
}

function findKey(obj: Record<string, unknown>, step: KeyStep): string | undefined {
  if (Object.prototype.hasOwnProperty.call(obj, step.exact)) return step.exact;
  return Object.keys(obj).find((k) => k.toLowerCase() === step.lower || k === step.snaked);
}

/**
 * A dotted path compiled once per filter: map keys may themselves contain dots (`config.image.os`), so at
 * each level the longest key wins. Every key each level may try is joined here, not once per object (that
 * was quadratic in the path's length for every object listed).
 */
function pathResolver(segments: string[]): (value: unknown) => unknown {
  // steps[i]: the keys to try when the rest of the path starts at segment i, longest first.
  const steps: KeyStep[][] = segments.map((_, i) => {
    const out: KeyStep[] = [];
    for (let next = segments.length; next > i; next--) {
      const exact = segments.slice(i, next).join('.');
      out.push({ exact, lower: exact.toLowerCase(), snaked: snake(exact), next });
    }
    return out;
  });
  const resolveFrom = (value: unknown, i: number): unknown => {
    if (i === segments.length) return value;
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
    const obj = value as Record<string, unknown>;
    for (const step of steps[i]!) {
      const key = findKey(obj, step);
      if (key !== undefined) {
        const found = resolveFrom(obj[key], step.next);
        if (found !== undefined || step.next === segments.length) return found;
      }
    }
    return undefined;
  };
  return (value) => resolveFrom(value, 0);
}

function asText(value: unknown): string | undefined {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return undefined;
}

/** A filter with its values compiled once, ready to test many objects. */
export type CompiledFilter = (obj: unknown) => boolean;

/** Compiles every value up front, so a pattern too large to use is refused before any work. */
export function compileFilter(expr: FilterExpr): CompiledFilter {
  switch (expr.kind) {
    case 'clause': {
      const match = valueMatcher(expr.value);
      const resolve = pathResolver(expr.field.split('.'));
      const eq = (obj: unknown) => {
        const text = asText(resolve(obj));
        return text !== undefined && match(text);
      };
      return expr.op === 'eq' ? eq : (obj) => !eq(obj);
    }
    case 'not': {
      const inner = compileFilter(expr.expr);
      return (obj) => !inner(obj);
    }
    case 'and': {
      const left = compileFilter(expr.left);
      const right = compileFilter(expr.right);
      return (obj) => left(obj) && right(obj);
    }
    case 'or': {
      const left = compileFilter(expr.left);
      const right = compileFilter(expr.right);
      return (obj) => left(obj) || right(obj);
    }
  }
}

export function matchesFilter(expr: FilterExpr, obj: unknown): boolean {
  return compileFilter(expr)(obj);
}
