import test from 'ava';
import { KeyRegistry } from '../../kernel/config/key-registry.js';
import { isBool, isUint, type ApiError } from '../../sdk/index.js';

test('lookup goes exact, then longest prefix, then pattern; user.* passes everywhere', (t) => {
  const keys = new KeyRegistry();
  keys.register({ key: 'limits.cpu', scope: 'instance', type: 'string', doc: 'cpu' });
  keys.register({ prefix: 'limits.', scope: 'instance', type: 'string', doc: 'any limit' });
  keys.register({ prefix: 'limits.kernel.', scope: 'instance', type: 'integer', validate: isUint, doc: 'kernel limit' });
  keys.register({ pattern: /^volatile\.[^.]+\.hwaddr$/, scope: 'instance', type: 'string', doc: 'mac' });
  t.is(keys.lookup('instance', 'limits.cpu')?.doc, 'cpu');
  t.is(keys.lookup('instance', 'limits.kernel.nofile')?.doc, 'kernel limit');
  t.is(keys.lookup('instance', 'limits.memory')?.doc, 'any limit');
  t.is(keys.lookup('instance', 'volatile.eth0.hwaddr')?.doc, 'mac');
  t.is(keys.lookup('instance', 'volatile.eth0.name'), undefined);
  t.is(keys.lookup('server', 'limits.cpu'), undefined, 'scopes are separate');
  t.truthy(keys.lookup('server', 'user.anything'));
  t.is(keys.lookup('server', 'user.'), undefined);
});

test('validate names the unknown key or the bad value with a 400', (t) => {
  const keys = new KeyRegistry();
  keys.register({ key: 'core.flag', scope: 'server', type: 'bool', validate: isBool, doc: 'flag' });
  t.notThrows(() => keys.validate('server', { 'core.flag': 'true', 'user.x': 'anything', }));
  t.notThrows(() => keys.validate('server', { 'core.flag': '' }), 'empty unsets');
  const unknown = t.throws(() => keys.validate('server', { 'core.bogus': '1' })) as ApiError;
  t.is(unknown.status, 400);
  t.regex(unknown.message, /core\.bogus/);
  const bad = t.throws(() => keys.validate('server', { 'core.flag': 'maybe' })) as ApiError;
  t.regex(bad.message, /core\.flag.*maybe/);
});

test('registering a key twice or with no form is refused', (t) => {
  const keys = new KeyRegistry();
  keys.register({ key: 'a.b', scope: 'server', type: 'string', doc: 'x' });
  t.throws(() => keys.register({ key: 'a.b', scope: 'server', type: 'string', doc: 'y' }), { message: /twice/ });
  t.throws(() => keys.register({ scope: 'server', type: 'string', doc: 'none' }), { message: /exactly one/ });
  t.is(keys.list('server').length, 1);
});
