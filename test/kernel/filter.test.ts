import test from 'ava';
import { parseFilter, matchesFilter, compileFilter, FilterSyntaxError, type FilterExpr } from '../../kernel/filter/index.js';
import { estimatedSize, MAX_PATTERN_SIZE } from '../../kernel/filter/pattern.js';

const instance = {
  name: 'c1',
  status: 'Running',
  ephemeral: false,
  stateful: true,
  architecture: 'x86_64',
  description: 'a web server',
  config: { 'image.os': 'Debian', 'image.release': 'bookworm', 'limits.cpu': '2', 'user.role': 'front end' },
  devices: { eth0: { nictype: 'bridged', parent: 'lxdbr0', type: 'nic' }, root: { path: '/', pool: 'default', type: 'disk' } },
  expanded_config: { 'user.foo': 'bar' },
  profiles: ['default'],
};
const image = {
  fingerprint: 'abc123',
  properties: { os: 'alpine', release: '3.18', description: 'Alpine 3.18' },
  update_source: { protocol: 'simplestreams', server: 'https://images.example' },
  public: true,
  size: 4096,
  type: 'container',
};

const m = (filter: string, obj: unknown = instance) => matchesFilter(parseFilter(filter), obj);
const parseAndCompile = (filter: string) => compileFilter(parseFilter(filter));

test('eq and ne on plain fields, booleans and numbers', (t) => {
  t.true(m('name eq c1'));
  t.false(m('name eq c2'));
  t.true(m('name ne c2'));
  t.true(m('ephemeral eq false'));
  t.true(m('stateful eq true'));
  t.true(m('size eq 4096', image));
  t.true(m('missing eq ""'), 'a missing field equals the empty string');
  t.false(m('profiles eq default'), 'lists never equal a value');
  t.true(m('status eq running'), 'values match without regard to case, as `lxc list status=running` needs');
  t.true(m('name eq C1'));
  t.true(m('status eq RUN.*'));
  t.false(m('status ne running'));
});

test('config, devices, Properties and UpdateSource paths', (t) => {
  t.true(m('config.image.os eq Debian'));
  t.true(m('config.limits.cpu eq 2'));
  t.true(m('devices.eth0.nictype eq bridged'));
  t.true(m('devices.root.pool eq default'));
  t.false(m('devices.eth0.nictype eq macvlan'));
  t.true(m('expanded_config.user.foo eq bar'));
  t.true(m('Properties.os eq alpine', image));
  t.true(m('properties.release eq 3.18', image));
  t.true(m('UpdateSource.Protocol eq simplestreams', image));
  t.true(m('update_source.protocol eq simplestreams', image));
});

test('not, and, or, nesting and strict left associativity', (t) => {
  t.true(m('not name eq c2'));
  t.true(m('name eq c1 and status eq Running'));
  t.false(m('name eq c1 and status eq Stopped'));
  t.true(m('name eq c2 or status eq Running'));
  // (name eq c1 or name eq x) and status eq Stopped -> false; with and-before-or precedence it would be true.
  t.false(m('name eq c1 or name eq x and status eq Stopped'));
  t.true(m('name eq c1 or (name eq x and status eq Stopped)'));
  t.true(m('not (name eq c2 or status eq Stopped)'));
  t.false(m('not (name eq c1 and (status eq Running or status eq Frozen))'));
  t.true(m('((name eq c1))'));
});

test('quoted values with spaces and escaped quotes; keywords in any case', (t) => {
  t.true(m('description eq "a web server"'));
  t.true(m("config.user.role eq 'front end'"));
  t.true(m('Properties.description eq "Alpine 3.18"', image));
  const quoted = { name: 'say "hi"' };
  t.true(m('name eq "say \\"hi\\""', quoted));
  t.true(m('name EQ c1 AND NOT status Eq Stopped'));
  t.true(m('name eq "and"', { name: 'and' }), 'a quoted keyword is a value');
});

test('values work as anchored regular expressions; a broken pattern is just a string', (t) => {
  t.true(m('name eq c.*'));
  t.false(m('name eq 1'), 'anchored: c1 does not match 1');
  t.true(m('config.image.os eq "Deb(ian|ootstrap)"'));
  t.false(m('name eq "c1("'));
  t.true(m('name eq "c1("', { name: 'c1(' }));
  t.true(m('name eq "C1("', { name: 'c1(' }), 'a broken pattern still compares without regard to case');
  t.true(m('name ne "(a+"'));
  t.false(m('name eq "c(?=1)"'), 'lookahead is not RE2: compared as text');
  t.false(m('name eq "a{1001}"', { name: 'a'.repeat(1001) }), 'RE2 refuses repeats over 1000: compared as text');
});

// As the reference (Go regexp): `^` + value + `$` only when the value has neither, case folded by `(?i)`.
test('anchoring and case follow the reference', (t) => {
  const named = (name: string) => ({ name });
  t.true(m('name eq ^c', named('c1')), 'a value with ^ is not anchored at the end');
  t.true(m('name eq 1$', named('c1')), 'a value with $ is not anchored at the start');
  t.false(m('name eq ^1', named('c1')));
  t.true(m('name eq "fa|zzz"', named('fab2')), 'the anchors wrap the text, not an alternation: ^fa|zzz$');
  t.true(m('name eq "zzz|b2"', named('fab2')));
  t.false(m('name eq "fa|zzz"', named('xfa')));
  t.true(m('name eq FA1', named('fa1')));
  t.true(m('name eq "(?i)fa1"', named('FA1')));
  t.false(m('name eq "(?-i)a.b"', named('A+B')), '(?-i) turns the folding off');
  t.true(m('name eq "(?-i)a.b"', named('a+b')));
  t.false(m('name eq "a+b"', named('a+b')), 'a valid pattern is only a pattern: + is a repeat');
  t.true(m('name eq \\Qa+b\\E', named('a+b')));
  t.true(m('name eq fa\\d', named('fa1')));
  t.true(m('name eq "(?P<n>fa1)"', named('fa1')));
  t.true(m('name eq k', named('\u212a')), 'RE2 folds k with KELVIN SIGN, as Go does');
});

test('an unquoted value keeps its parentheses, as the reference reads it; the ones it does not open close groups', (t) => {
  const named = (name: string) => ({ name });
  t.true(m('name eq (?i)FA1', named('fa1')));
  t.true(m('name eq (fa|fb)[0-9]', named('fb3')));
  t.true(m('name eq (a+', named('(A+')), 'an invalid pattern, compared as text');
  t.true(m('(name eq c1)'));
  t.true(m('((name eq c1))'));
  t.true(m('(name eq x or name eq (c|d)1)'));
  t.true(m('not (name eq (x|y)1)'));
  t.true(m('name eq c1 and (status eq (?i)RUNNING)'));
  t.deepEqual(parseFilter('(name eq (a+)+)'), { kind: 'clause', field: 'name', op: 'eq', value: '(a+)+' });
});

test('a catastrophic pattern for a backtracking engine matches in linear time', (t) => {
  const obj = { description: `${'a'.repeat(60)}!` };
  // On RegExp this takes about 2^60 steps; on RE2 a handful of microseconds.
  t.false(m('description eq "(a+)+"', obj));
  t.false(m('description eq "(a|aa)*"', obj));
  t.false(m('description eq "^(a*)*$"', obj));
  t.true(m('description eq "(a+)+!"', obj));
});

test('a pattern that would compile to a huge program is refused as a filter error', (t) => {
  t.true(estimatedSize('abc') < 10);
  t.true(estimatedSize('(abc){1000}') >= 3000);
  t.true(estimatedSize('x{2,1000}'.repeat(50)) > MAX_PATTERN_SIZE);
  t.true(estimatedSize('[a-z0-9]{1,63}\\.example\\.(com|org)') < 1000);
  const err = t.throws(() => parseAndCompile(`name eq "${'x{2,1000}'.repeat(50)}"`), { instanceOf: FilterSyntaxError });
  t.regex(err!.message, /too large/);
  t.notThrows(() => parseAndCompile('name eq "[a-z]{1,63}"'));
  t.throws(() => parseAndCompile('name eq "x{2,1000}"'), { message: /too large/ }, 'valid, and over the bound');
  t.false(m('name eq "x{2,1000}(("'), 'invalid, so compared as text, whatever its size');
  t.true(m('name eq "x{2,1000}(("', { name: 'X{2,1000}((' }));
  // Long values compared as text are linear whatever their length: never refused as too large.
  const long = { name: `${'é'.repeat(3000)}`, plain: 'x'.repeat(5000) };
  t.true(m(`name eq "${'É'.repeat(3000)}"`, long));
  t.true(m(`plain eq "${'X'.repeat(5000)}"`, long));
  t.false(m(`plain eq "${'x'.repeat(4000)}(("`, long), 'an invalid pattern of any length is text');
});

test('malformed filters throw FilterSyntaxError with a message naming the problem', (t) => {
  const cases: [string, RegExp][] = [
    ['', /Empty/],
    ['   ', /Empty/],
    ['name', /Missing operator/],
    ['name eq', /Missing value after "eq"/],
    ['name like c1', /Unknown operator "like"/],
    ['name eq c1 and', /Missing expression after "and"/],
    ['name eq c1 or', /Missing expression after "or"/],
    ['(name eq c1', /Missing "\)"/],
    ['name eq c1)', /Unexpected "\)"/],
    ['()', /Empty group/],
    ['name eq "c1', /Unterminated quote/],
    ['and name eq c1', /Expected a field name/],
    ['name eq c1 name eq c2', /Unexpected "name"/],
    ['not', /Missing expression/],
    ['name eq (', /Missing value/],
  ];
  for (const [input, message] of cases) {
    const err = t.throws(() => parseFilter(input), { instanceOf: FilterSyntaxError }, input);
    t.regex(err!.message, message, input);
  }
});

// Random expressions, printed and parsed back, evaluate the same as their AST.
function prng(seed: number) {
  let s = seed;
  return () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
}

function randomExpr(rand: () => number, depth: number): FilterExpr {
  const r = rand();
  if (depth === 0 || r < 0.35) {
    const fields = ['name', 'status', 'config.image.os', 'devices.eth0.nictype', 'description'];
    const values = ['c1', 'Running', 'Debian', 'bridged', 'a web server', 'x'];
    return { kind: 'clause', field: fields[Math.floor(rand() * fields.length)]!, op: rand() < 0.5 ? 'eq' : 'ne', value: values[Math.floor(rand() * values.length)]! };
  }
  if (r < 0.5) return { kind: 'not', expr: randomExpr(rand, depth - 1) };
  return { kind: rand() < 0.5 ? 'and' : 'or', left: randomExpr(rand, depth - 1), right: randomExpr(rand, depth - 1) };
}

function print(e: FilterExpr): string {
  switch (e.kind) {
    case 'clause': return `${e.field} ${e.op} "${e.value}"`;
    case 'not': return `not (${print(e.expr)})`;
    default: return `(${print(e.left)}) ${e.kind} (${print(e.right)})`;
  }
}

test('printed random expressions parse back to the same meaning', (t) => {
  const rand = prng(42);
  for (let i = 0; i < 500; i++) {
    const expr = randomExpr(rand, 4);
    t.is(matchesFilter(parseFilter(print(expr)), instance), matchesFilter(expr, instance), print(expr));
  }
});
