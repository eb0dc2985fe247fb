/** The kernel's extension point table: open while plugins register, closed for good afterwards. */
import test from 'ava';
import { ExtensionPointTable } from '../../kernel/extension-points.js';
import { createExtensionPoint } from '../../sdk/index.js';

interface Registry {
  readonly kinds: string[];
  add(kind: string): number;
}

const Ref = createExtensionPoint<Registry>('test.registry');

function registry(): Registry {
  const kinds: string[] = [];
  return { kinds, add: (kind) => kinds.push(kind) };
}

test('a plugin provides, another gets and registers while plugins register', (t) => {
  const table = new ExtensionPointTable();
  const impl = registry();
  table.scoped('host').provide(Ref, impl);
  const point = table.scoped('driver').get(Ref)!;
  t.is(point.add('a'), 1, 'calls go through with their result');
  t.deepEqual(point.kinds, ['a']);
  t.is(table.scoped('driver').get(createExtensionPoint<Registry>('test.other')), undefined, 'an extension point nobody offers');
});

test('two plugins providing one extension point is refused, naming both', (t) => {
  const table = new ExtensionPointTable();
  table.scoped('host').provide(Ref, registry());
  t.throws(() => table.scoped('rival').provide(Ref, registry()), { message: 'extension point "test.registry" is provided by both host and rival' });
});

test('once closed: get, provide and calls on a kept extension point are refused; what it holds stays readable', (t) => {
  const table = new ExtensionPointTable();
  const impl = registry();
  table.scoped('host').provide(Ref, impl);
  const kept = table.scoped('driver').get(Ref)!;
  kept.add('early');
  table.close();
  t.throws(() => table.scoped('driver').get(Ref), { message: /driver: extension point "test\.registry" is only open while plugins register/ });
  t.throws(() => table.scoped('late').provide(createExtensionPoint<Registry>('test.late'), registry()), { message: /only open while plugins register/ });
  t.throws(() => kept.add('late'), { message: 'extension point "test.registry" is only open while plugins register (add called later)' });
  t.deepEqual(impl.kinds, ['early'], 'the late call changed nothing');
  t.deepEqual(kept.kinds, ['early']);
});
