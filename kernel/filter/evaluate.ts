/** Evaluates a parsed filter against an object as the API renders it. */
import type { FilterExpr } from './parse.js';
import { valueMatcher } from './pattern.js';

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

/** A filter with its values compiled once, ready to test many objects. */
export type CompiledFilter = (obj: unknown) => boolean;

/** Compiles every value up front, so a pattern too large to use is refused before any work. */
export function compileFilter(expr: FilterExpr): CompiledFilter {
  switch (expr.kind) {
    case 'clause': {
      const match = valueMatcher(expr.value);
      const path = expr.field.split('.');
      const eq = (obj: unknown) => {
        const text = asText(resolve(obj, path));
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
