/**
 * A small renderer for image templates, in the Django-like syntax images are written for:
 * `{{ expr|filter }}`, `{% if %}/{% elif %}/{% else %}`, `{% for %}` (with `{% empty %}`),
 * `{% set %}`, `{% autoescape %}`, `{% comment %}`, `{# ... #}`, and `{%- -%}` trimming.
 * Templates come from untrusted images: lookups see only own data properties, nothing is
 * evaluated as code, and the output size is capped.
 */
import { isPlainObject } from '../../../sdk/index.js';

export class TemplateError extends Error {
  constructor(message: string, readonly line?: number) {
    super(line === undefined ? message : `line ${line}: ${message}`);
    this.name = 'TemplateError';
  }
}

export type TemplateFunction = (...args: unknown[]) => unknown;
export type TemplateContext = Record<string, unknown>;

const MAX_OUTPUT = 16 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Lexing the template into text, output, tag and comment chunks.

interface Chunk {
  kind: 'text' | 'output' | 'tag';
  body: string;
  line: number;
}

function chunks(source: string): Chunk[] {
  const out: Chunk[] = [];
  let pos = 0;
  let line = 1;
  let trimNext = false;
  const lineAt = (text: string) => text.split('\n').length - 1;
  while (pos < source.length) {
    const open = source.slice(pos).search(/\{[{%#]/);
    const start = open < 0 ? source.length : pos + open;
    let text = source.slice(pos, start);
    if (trimNext) text = text.replace(/^\s+/, '');
    trimNext = false;
    if (start === source.length) {
      if (text) out.push({ kind: 'text', body: text, line });
      break;
    }
    const opener = source[start + 1];
    const closer = opener === '{' ? '}}' : opener === '%' ? '%}' : '#}';
    const end = source.indexOf(closer, start + 2);
    const tagLine = line + lineAt(source.slice(pos, start));
    if (end < 0) throw new TemplateError(`"${source.slice(start, start + 2)}" is never closed`, tagLine);
    let inner = source.slice(start + 2, end);
    if (inner.startsWith('-')) {
      text = text.replace(/\s+$/, '');
      inner = inner.slice(1);
    }
    if (inner.endsWith('-')) {
      trimNext = true;
      inner = inner.slice(0, -1);
    }
    if (text) out.push({ kind: 'text', body: text, line });
    if (opener !== '#') out.push({ kind: opener === '{' ? 'output' : 'tag', body: inner.trim(), line: tagLine });
    line = tagLine + lineAt(source.slice(start, end + 2));
    pos = end + 2;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Expressions.

type Token =
  | { t: 'str'; v: string }
  | { t: 'num'; v: number }
  | { t: 'name'; v: string }
  | { t: 'op'; v: string };

const OPERATORS = ['==', '!=', '<=', '>=', '&&', '||', '<', '>', '!', '+', '-', '*', '/', '%', '|', ':', ',', '.', '(', ')', '=', '[', ']'];

function tokenize(text: string, line: number): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) { i++; continue; }
    if (c === '"' || c === "'") {
      let v = '';
      i++;
      while (i < text.length && text[i] !== c) {
        if (text[i] === '\\' && i + 1 < text.length) {
          const e = text[++i];
          v += e === 'n' ? '\n' : e === 't' ? '\t' : e === 'r' ? '\r' : e;
        } else {
          v += text[i];
        }
        i++;
      }
      if (i >= text.length) throw new TemplateError('unterminated string', line);
      i++;
      tokens.push({ t: 'str', v });
      continue;
    }
    const num = /^\d+(\.\d+)?/.exec(text.slice(i));
    if (num) {
      tokens.push({ t: 'num', v: Number(num[0]) });
      i += num[0].length;
      continue;
    }
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i));
    if (name) {
      tokens.push({ t: 'name', v: name[0] });
      i += name[0].length;
      continue;
    }
    const op = OPERATORS.find((o) => text.startsWith(o, i));
    if (!op) throw new TemplateError(`unexpected character "${c}"`, line);
    tokens.push({ t: 'op', v: op });
    i += op.length;
  }
  return tokens;
}

type Expr =
  | { k: 'lit'; v: unknown }
  | { k: 'var'; name: string }
  | { k: 'attr'; of: Expr; key: string | number }
  | { k: 'call'; fn: Expr; args: Expr[] }
  | { k: 'filter'; of: Expr; name: string; arg?: Expr }
  | { k: 'not'; of: Expr }
  | { k: 'neg'; of: Expr }
  | { k: 'bin'; op: string; a: Expr; b: Expr };

const FILTERS: Record<string, (value: unknown, arg: unknown, hasArg: boolean) => unknown> = {
  default: (v, arg) => (truthy(v) ? v : arg),
  default_if_none: (v, arg) => (v === undefined || v === null ? arg : v),
  lower: (v) => display(v).toLowerCase(),
  upper: (v) => display(v).toUpperCase(),
  capfirst: (v) => { const s = display(v); return s.charAt(0).toUpperCase() + s.slice(1); },
  length: (v) => (typeof v === 'string' || Array.isArray(v) ? v.length : isPlainObject(v) ? Object.keys(v).length : 0),
  join: (v, arg) => (Array.isArray(v) ? v.map(display).join(display(arg)) : display(v)),
  first: (v) => (typeof v === 'string' || Array.isArray(v) ? v[0] : undefined),
  last: (v) => (typeof v === 'string' || Array.isArray(v) ? v[v.length - 1] : undefined),
  safe: (v) => v,
  escape: (v) => escapeHtml(display(v)),
  yesno: (v, arg, hasArg) => {
    const [yes, no, none] = (hasArg ? display(arg) : 'yes,no,maybe').split(',');
    if (v === undefined || v === null) return none ?? no;
    return truthy(v) ? yes : no;
  },
};

class ExprParser {
  private i = 0;
  constructor(private readonly tokens: Token[], private readonly line: number) {}

  static parse(text: string, line: number): Expr {
    const p = new ExprParser(tokenize(text, line), line);
    const e = p.expr();
    p.end();
    return e;
  }

  get done(): boolean { return this.i >= this.tokens.length; }

  end(): void {
    if (!this.done) throw this.fail(`unexpected "${this.peekText()}"`);
  }

  fail(message: string): TemplateError { return new TemplateError(message, this.line); }

  private peek(): Token | undefined { return this.tokens[this.i]; }
  private peekText(): string { const t = this.peek(); return t ? String(t.v) : 'end'; }
  isOp(v: string): boolean { const t = this.peek(); return t?.t === 'op' && t.v === v; }
  isWord(v: string): boolean { const t = this.peek(); return t?.t === 'name' && t.v === v; }

  take(): Token {
    const t = this.tokens[this.i++];
    if (!t) throw this.fail('unexpected end of expression');
    return t;
  }

  expectOp(v: string): void {
    if (!this.isOp(v)) throw this.fail(`expected "${v}", found "${this.peekText()}"`);
    this.i++;
  }

  name(): string {
    const t = this.take();
    if (t.t !== 'name') throw this.fail(`expected a name, found "${t.v}"`);
    return t.v;
  }

  expr(): Expr {
    let a = this.and();
    while (this.isWord('or') || this.isOp('||')) { this.i++; a = { k: 'bin', op: 'or', a, b: this.and() }; }
    return a;
  }

  private and(): Expr {
    let a = this.not();
    while (this.isWord('and') || this.isOp('&&')) { this.i++; a = { k: 'bin', op: 'and', a, b: this.not() }; }
    return a;
  }

  private not(): Expr {
    if (this.isWord('not') || this.isOp('!')) { this.i++; return { k: 'not', of: this.not() }; }
    return this.compare();
  }

  private compare(): Expr {
    const a = this.additive();
    for (const op of ['==', '!=', '<=', '>=', '<', '>']) {
      if (this.isOp(op)) { this.i++; return { k: 'bin', op, a, b: this.additive() }; }
    }
    if (this.isWord('in')) { this.i++; return { k: 'bin', op: 'in', a, b: this.additive() }; }
    if (this.isWord('not') && this.tokens[this.i + 1]?.t === 'name' && this.tokens[this.i + 1].v === 'in') {
      this.i += 2;
      return { k: 'not', of: { k: 'bin', op: 'in', a, b: this.additive() } };
    }
    return a;
  }

  private additive(): Expr {
    let a = this.term();
    while (this.isOp('+') || this.isOp('-')) { const op = String(this.take().v); a = { k: 'bin', op, a, b: this.term() }; }
    return a;
  }

  private term(): Expr {
    let a = this.unary();
    while (this.isOp('*') || this.isOp('/') || this.isOp('%')) { const op = String(this.take().v); a = { k: 'bin', op, a, b: this.unary() }; }
    return a;
  }

  private unary(): Expr {
    if (this.isOp('-')) { this.i++; return { k: 'neg', of: this.unary() }; }
    if (this.isOp('+')) { this.i++; return this.unary(); }
    return this.filtered();
  }

  private filtered(): Expr {
    let e = this.postfix();
    while (this.isOp('|')) {
      this.i++;
      const name = this.name();
      if (!Object.hasOwn(FILTERS, name)) throw this.fail(`unknown filter "${name}"`);
      let arg: Expr | undefined;
      if (this.isOp(':')) {
        this.i++;
        arg = this.postfix();
      } else if (this.isOp('(')) {
        this.i++;
        arg = this.expr();
        this.expectOp(')');
      }
      e = { k: 'filter', of: e, name, arg };
    }
    return e;
  }

  private postfix(): Expr {
    let e = this.primary();
    for (;;) {
      if (this.isOp('.')) {
        this.i++;
        const t = this.take();
        if (t.t !== 'name' && !(t.t === 'num' && Number.isInteger(t.v))) throw this.fail(`expected a name after ".", found "${t.v}"`);
        e = { k: 'attr', of: e, key: t.v };
      } else if (this.isOp('(')) {
        this.i++;
        const args: Expr[] = [];
        while (!this.isOp(')')) {
          args.push(this.expr());
          if (!this.isOp(')')) this.expectOp(',');
        }
        this.i++;
        e = { k: 'call', fn: e, args };
      } else {
        return e;
      }
    }
  }

  private primary(): Expr {
    const t = this.take();
    if (t.t === 'str' || t.t === 'num') return { k: 'lit', v: t.v };
    if (t.t === 'op' && t.v === '(') {
      const e = this.expr();
      this.expectOp(')');
      return e;
    }
    if (t.t === 'name') {
      if (t.v === 'true' || t.v === 'True') return { k: 'lit', v: true };
      if (t.v === 'false' || t.v === 'False') return { k: 'lit', v: false };
      if (t.v === 'nil' || t.v === 'None') return { k: 'lit', v: null };
      return { k: 'var', name: t.v };
    }
    throw this.fail(`unexpected "${t.v}"`);
  }
}

// ---------------------------------------------------------------------------------------------
// Values.

/** Django truthiness: empty strings, zero, empty lists and maps, nothing at all are false. */
export function truthy(v: unknown): boolean {
  if (v === undefined || v === null || v === false) return false;
  if (typeof v === 'number') return v !== 0 && !Number.isNaN(v);
  if (typeof v === 'string' || Array.isArray(v)) return v.length > 0;
  if (isPlainObject(v)) return Object.keys(v).length > 0;
  return true;
}

function display(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (typeof v === 'function') return '';
  return JSON.stringify(v);
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]!));
}

/** Only own, plain data: `x.constructor` or `x.__proto__` find nothing. */
function lookup(of: unknown, key: string | number): unknown {
  if (Array.isArray(of)) return typeof key === 'number' ? of[key] : undefined;
  if (typeof of === 'string') return typeof key === 'number' ? of[key] : undefined;
  if (of instanceof Map) return of.get(String(key));
  if (isPlainObject(of) && Object.hasOwn(of, String(key))) return of[String(key)];
  return undefined;
}

function equal(a: unknown, b: unknown): boolean {
  if ((a === undefined || a === null) && (b === undefined || b === null)) return true;
  return a === b;
}

function contains(haystack: unknown, needle: unknown): boolean {
  if (typeof haystack === 'string') return haystack.includes(display(needle));
  if (Array.isArray(haystack)) return haystack.some((x) => equal(x, needle));
  if (isPlainObject(haystack)) return Object.hasOwn(haystack, display(needle));
  return false;
}

function arithmetic(op: string, a: unknown, b: unknown): unknown {
  if (op === '+' && (typeof a === 'string' || typeof b === 'string')) return display(a) + display(b);
  const x = Number(a);
  const y = Number(b);
  switch (op) {
    case '+': return x + y;
    case '-': return x - y;
    case '*': return x * y;
    case '/': return y === 0 ? 0 : x / y;
    default: return y === 0 ? 0 : x % y;
  }
}

function order(op: string, a: unknown, b: unknown): boolean {
  const both = typeof a === 'string' && typeof b === 'string';
  const x = both ? a : Number(a);
  const y = both ? b : Number(b);
  switch (op) {
    case '<': return x < y;
    case '>': return x > y;
    case '<=': return x <= y;
    default: return x >= y;
  }
}

class Scope {
  constructor(private readonly vars: Map<string, unknown>, private readonly parent?: Scope) {}
  get(name: string): unknown {
    if (this.vars.has(name)) return this.vars.get(name);
    return this.parent?.get(name);
  }
  set(name: string, value: unknown): void { this.vars.set(name, value); }
  child(): Scope { return new Scope(new Map(), this); }
}

function evaluate(e: Expr, scope: Scope, line: number): unknown {
  switch (e.k) {
    case 'lit': return e.v;
    case 'var': return scope.get(e.name);
    case 'attr': return lookup(evaluate(e.of, scope, line), e.key);
    case 'call': {
      const fn = evaluate(e.fn, scope, line);
      if (typeof fn !== 'function') throw new TemplateError('calling something that is not a function', line);
      return (fn as TemplateFunction)(...e.args.map((a) => evaluate(a, scope, line)));
    }
    case 'filter': {
      const value = evaluate(e.of, scope, line);
      const arg = e.arg ? evaluate(e.arg, scope, line) : undefined;
      return FILTERS[e.name](value, arg, e.arg !== undefined);
    }
    case 'not': return !truthy(evaluate(e.of, scope, line));
    case 'neg': return -Number(evaluate(e.of, scope, line));
    case 'bin': {
      if (e.op === 'and') return truthy(evaluate(e.a, scope, line)) && truthy(evaluate(e.b, scope, line));
      if (e.op === 'or') return truthy(evaluate(e.a, scope, line)) || truthy(evaluate(e.b, scope, line));
      const a = evaluate(e.a, scope, line);
      const b = evaluate(e.b, scope, line);
      switch (e.op) {
        case '==': return equal(a, b);
        case '!=': return !equal(a, b);
        case 'in': return contains(b, a);
        case '<': case '>': case '<=': case '>=': return order(e.op, a, b);
        default: return arithmetic(e.op, a, b);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Statements.

type Node =
  | { k: 'text'; text: string }
  | { k: 'out'; expr: Expr; line: number }
  | { k: 'if'; branches: { cond: Expr; body: Node[] }[]; otherwise: Node[]; line: number }
  | { k: 'for'; names: string[]; iter: Expr; reversed: boolean; body: Node[]; empty: Node[]; line: number }
  | { k: 'set'; name: string; expr: Expr; line: number }
  | { k: 'escape'; on: boolean; body: Node[] };

const BLOCK_ENDS: Record<string, string[]> = {
  if: ['elif', 'else', 'endif'],
  for: ['empty', 'endfor'],
  autoescape: ['endautoescape'],
};

class Parser {
  private i = 0;
  constructor(private readonly list: Chunk[]) {}

  /** Parse nodes until one of `stops` (a tag name) or the end; returns the stopping tag. */
  nodes(stops: string[], opener?: Chunk): { nodes: Node[]; stop?: { word: string; rest: string; chunk: Chunk } } {
    const nodes: Node[] = [];
    while (this.i < this.list.length) {
      const c = this.list[this.i++];
      if (c.kind === 'text') { nodes.push({ k: 'text', text: c.body }); continue; }
      if (c.kind === 'output') {
        if (!c.body) throw new TemplateError('empty "{{ }}"', c.line);
        nodes.push({ k: 'out', expr: ExprParser.parse(c.body, c.line), line: c.line });
        continue;
      }
      const m = /^([a-z_]+)\s*([\s\S]*)$/.exec(c.body);
      if (!m) throw new TemplateError(`malformed tag "{% ${c.body} %}"`, c.line);
      const [, word, rest] = m;
      if (stops.includes(word)) return { nodes, stop: { word, rest, chunk: c } };
      nodes.push(this.tag(word, rest, c));
    }
    if (opener) throw new TemplateError(`"{% ${opener.body} %}" is never closed (expected ${stops.map((s) => `{% ${s} %}`).join(' or ')})`, opener.line);
    return { nodes };
  }

  private tag(word: string, rest: string, c: Chunk): Node {
    switch (word) {
      case 'if': {
        const branches = [{ cond: ExprParser.parse(rest, c.line), body: [] as Node[] }];
        let otherwise: Node[] = [];
        for (;;) {
          const part = this.nodes(BLOCK_ENDS.if, c);
          branches[branches.length - 1].body = part.nodes;
          const stop = part.stop!;
          if (stop.word === 'elif') {
            branches.push({ cond: ExprParser.parse(stop.rest, stop.chunk.line), body: [] });
            continue;
          }
          if (stop.word === 'else') otherwise = this.nodes(['endif'], c).nodes;
          return { k: 'if', branches, otherwise, line: c.line };
        }
      }
      case 'for': {
        const m = /^([A-Za-z_]\w*)(?:\s*,\s*([A-Za-z_]\w*))?\s+in\s+([\s\S]+?)(\s+reversed)?$/.exec(rest);
        if (!m) throw new TemplateError(`malformed "{% for %}": expected "for x in list"`, c.line);
        const names = m[2] ? [m[1], m[2]] : [m[1]];
        const iter = ExprParser.parse(m[3], c.line);
        const body = this.nodes(BLOCK_ENDS.for, c);
        let empty: Node[] = [];
        if (body.stop!.word === 'empty') empty = this.nodes(['endfor'], c).nodes;
        return { k: 'for', names, iter, reversed: Boolean(m[4]), body: body.nodes, empty, line: c.line };
      }
      case 'set': {
        const m = /^([A-Za-z_]\w*)\s*=\s*([\s\S]+)$/.exec(rest);
        if (!m) throw new TemplateError('malformed "{% set %}": expected "set name = expression"', c.line);
        return { k: 'set', name: m[1], expr: ExprParser.parse(m[2], c.line), line: c.line };
      }
      case 'autoescape': {
        if (rest !== 'on' && rest !== 'off') throw new TemplateError('"{% autoescape %}" takes "on" or "off"', c.line);
        return { k: 'escape', on: rest === 'on', body: this.nodes(BLOCK_ENDS.autoescape, c).nodes };
      }
      case 'comment': {
        // Everything up to endcomment is ignored, parsed or not.
        while (this.i < this.list.length) {
          const d = this.list[this.i++];
          if (d.kind === 'tag' && d.body === 'endcomment') return { k: 'text', text: '' };
        }
        throw new TemplateError('"{% comment %}" is never closed', c.line);
      }
      default:
        throw new TemplateError(`unknown or misplaced tag "${word}"`, c.line);
    }
  }
}

/** Parse once; render with `render(context)`. Throws TemplateError on bad syntax. */
export function compileTemplate(source: string): (context: TemplateContext) => string {
  const nodes = new Parser(chunks(source)).nodes([]).nodes;
  return (context) => {
    const out: string[] = [];
    let size = 0;
    const emit = (s: string) => {
      size += s.length;
      if (size > MAX_OUTPUT) throw new TemplateError('the rendered output is too large');
      out.push(s);
    };
    run(nodes, new Scope(new Map(Object.entries(context))), false, emit);
    return out.join('');
  };
}

export function renderTemplate(source: string, context: TemplateContext): string {
  return compileTemplate(source)(context);
}

function run(nodes: Node[], scope: Scope, escape: boolean, emit: (s: string) => void): void {
  for (const node of nodes) {
    switch (node.k) {
      case 'text': emit(node.text); break;
      case 'out': {
        const s = display(evaluate(node.expr, scope, node.line));
        emit(escape ? escapeHtml(s) : s);
        break;
      }
      case 'if': {
        const hit = node.branches.find((b) => truthy(evaluate(b.cond, scope, node.line)));
        run(hit ? hit.body : node.otherwise, scope, escape, emit);
        break;
      }
      case 'for': {
        const items = iterate(evaluate(node.iter, scope, node.line));
        if (node.reversed) items.reverse();
        if (items.length === 0) { run(node.empty, scope, escape, emit); break; }
        items.forEach(([key, value], index) => {
          const inner = scope.child();
          if (node.names.length === 2) { inner.set(node.names[0], key); inner.set(node.names[1], value); } else inner.set(node.names[0], value);
          inner.set('forloop', {
            Counter: index + 1, Counter0: index, Revcounter: items.length - index, Revcounter0: items.length - index - 1,
            First: index === 0, Last: index === items.length - 1,
          });
          run(node.body, inner, escape, emit);
        });
        break;
      }
      case 'set': scope.set(node.name, evaluate(node.expr, scope, node.line)); break;
      case 'escape': run(node.body, scope, node.on, emit); break;
    }
  }
}

/** What a for loop walks: lists by index, maps by sorted key, strings by character. */
function iterate(v: unknown): [unknown, unknown][] {
  if (Array.isArray(v)) return v.map((x, i) => [i, x]);
  if (typeof v === 'string') return [...v].map((x, i) => [i, x]);
  if (isPlainObject(v)) return Object.keys(v).sort().map((k) => [k, v[k]]);
  return [];
}
