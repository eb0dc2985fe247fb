/**
 * The `filter` query language (spec part 4.1): `field eq value`, `ne`, unary `not`, `and`/`or`
 * combined strictly left to right, parentheses, quoted values.
 */

export type FilterExpr =
  | { kind: 'clause'; field: string; op: 'eq' | 'ne'; value: string }
  | { kind: 'not'; expr: FilterExpr }
  | { kind: 'and' | 'or'; left: FilterExpr; right: FilterExpr };

export class FilterSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FilterSyntaxError';
  }
}

interface Token {
  text: string;
  quoted: boolean;
  pos: number;
}

function tokenize(input: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < input.length) {
    const c = input[i]!;
    if (/\s/.test(c)) { i++; continue; }
    if (keyword(tokens[tokens.length - 1], 'eq', 'ne') && !isPunctuation(input, i) && c !== '"' && c !== "'") {
      i = unquotedValue(input, i, tokens);
      continue;
    }
    if (c === '(' || c === ')') { tokens.push({ text: c, quoted: false, pos: i }); i++; continue; }
    if (c === '"' || c === "'") {
      const start = i++;
      let text = '';
      while (i < input.length && input[i] !== c) {
        if (input[i] === '\\' && i + 1 < input.length) i++;
        text += input[i++];
      }
      if (i >= input.length) throw new FilterSyntaxError(`Unterminated quote starting at position ${start}`);
      i++;
      tokens.push({ text, quoted: true, pos: start });
      continue;
    }
    const start = i;
    while (i < input.length && !/[\s()"']/.test(input[i]!)) i++;
    tokens.push({ text: input.slice(start, i), quoted: false, pos: start });
  }
  return tokens;
}

/** A parenthesis standing alone (before a space, another parenthesis or the end) is grouping. */
const isPunctuation = (input: string, i: number) => /[()]/.test(input[i]!) && (i + 1 >= input.length || /[\s()]/.test(input[i + 1]!));

/**
 * An unquoted value runs to the next space, parentheses included, as the reference reads it:
 * `name eq (?i)web-.*` is a pattern, not a group. Closing parentheses at its end that it does
 * not open itself close groups: `(name eq c1)`, `(name eq (a+)+)`. Returns where it ends.
 */
function unquotedValue(input: string, start: number, tokens: Token[]): number {
  let end = start;
  while (end < input.length && !/\s/.test(input[end]!)) end++;
  const text = input.slice(start, end);
  let balance = 0;
  for (const ch of text) balance += ch === '(' ? 1 : ch === ')' ? -1 : 0;
  const closing = Math.min(Math.max(-balance, 0), /\)*$/.exec(text)![0].length);
  tokens.push({ text: text.slice(0, text.length - closing), quoted: false, pos: start });
  for (let k = closing; k > 0; k--) tokens.push({ text: ')', quoted: false, pos: end - k });
  return end;
}

/**
 * Bounds a client's filter is held to. A field of thousands of segments cost seconds per object listed, and
 * thousands of nested groups overflowed the parser's stack; real fields have a handful of segments, real
 * filters a few levels and comparisons.
 */
export const MAX_FIELD_SEGMENTS = 32;
export const MAX_NESTING = 64;
/** Each clause is tested against every object listed: 128 of them over 10,000 instances is already ~1 s. */
export const MAX_CLAUSES = 128;

const keyword = (t: Token | undefined, ...words: string[]) => t !== undefined && !t.quoted && words.includes(t.text.toLowerCase());

export function parseFilter(input: string): FilterExpr {
  if (input.trim() === '') throw new FilterSyntaxError('Empty filter');
  const tokens = tokenize(input);
  let i = 0;
  const where = () => (tokens[i] ? `at position ${tokens[i]!.pos}` : 'at the end');

  // sequence := term (('and' | 'or') term)*   -- left associative, no precedence
  const sequence = (): FilterExpr => {
    let left = term();
    while (keyword(tokens[i], 'and', 'or')) {
      const op = tokens[i++]!.text.toLowerCase() as 'and' | 'or';
      if (tokens[i] === undefined || keyword(tokens[i], ')')) throw new FilterSyntaxError(`Missing expression after "${op}" ${where()}`);
      left = { kind: op, left, right: term() };
    }
    return left;
  };

  // term := 'not' term | '(' sequence ')' | field ('eq' | 'ne') value
  let depth = 0;
  const nested = <T>(t: Token, inner: () => T): T => {
    if (++depth > MAX_NESTING) throw new FilterSyntaxError(`Nested too deeply at position ${t.pos} (at most ${MAX_NESTING} levels of "not" and parentheses)`);
    const out = inner();
    depth--;
    return out;
  };
  const term = (): FilterExpr => {
    const t = tokens[i];
    if (t === undefined) throw new FilterSyntaxError('Missing expression at the end');
    if (keyword(t, 'not')) {
      i++;
      return nested(t, () => ({ kind: 'not', expr: term() }));
    }
    if (!t.quoted && t.text === '(') return nested(t, () => group(t));
    if (!t.quoted && t.text === ')') throw new FilterSyntaxError(`Unexpected ")" at position ${t.pos}`);
    if (keyword(t, 'and', 'or', 'eq', 'ne')) throw new FilterSyntaxError(`Expected a field name but found "${t.text}" at position ${t.pos}`);
    if (t.text.split('.').length > MAX_FIELD_SEGMENTS) throw new FilterSyntaxError(`The field at position ${t.pos} has more than ${MAX_FIELD_SEGMENTS} dot-separated parts`);
    return clause(t);
  };
  const group = (t: Token): FilterExpr => {
    i++;
    if (tokens[i]?.text === ')' && !tokens[i]!.quoted) throw new FilterSyntaxError(`Empty group at position ${t.pos}`);
    const inner = sequence();
    if (tokens[i]?.text !== ')' || tokens[i]!.quoted) throw new FilterSyntaxError(`Missing ")" for "(" at position ${t.pos}`);
    i++;
    return inner;
  };
  let clauses = 0;
  const clause = (t: Token): FilterExpr => {
    if (++clauses > MAX_CLAUSES) throw new FilterSyntaxError(`More than ${MAX_CLAUSES} comparisons (the one at position ${t.pos} is past the limit)`);
    i++;
    const op = tokens[i];
    if (op === undefined) throw new FilterSyntaxError(`Missing operator after "${t.text}" at the end`);
    if (!keyword(op, 'eq', 'ne')) throw new FilterSyntaxError(`Unknown operator "${op.text}" at position ${op.pos} (expected eq or ne)`);
    i++;
    const value = tokens[i];
    if (value === undefined || (!value.quoted && (value.text === '(' || value.text === ')'))) {
      throw new FilterSyntaxError(`Missing value after "${op.text}" ${value ? `at position ${value.pos}` : 'at the end'}`);
    }
    i++;
    return { kind: 'clause', field: t.text, op: op.text.toLowerCase() as 'eq' | 'ne', value: value.text };
  };

  const expr = sequence();
  if (i < tokens.length) throw new FilterSyntaxError(`Unexpected "${tokens[i]!.text}" at position ${tokens[i]!.pos}`);
  return expr;
}
