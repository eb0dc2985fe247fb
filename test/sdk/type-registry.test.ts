import test from 'ava';
import { TypeRegistry, type PluginCatalog } from '../../sdk/index.js';

const catalog: PluginCatalog = { declares: (point, name) => point === 'nic-type' && ['example', 'sriov'].includes(name) };

test('a type registry answers enabled, not enabled (declared by a manifest) or unknown', (t) => {
  const types = new TypeRegistry<{ n: number }>('nic-type', 'nictype', catalog);
  types.register('p2p', { n: 1 });
  t.is(types.availability('p2p'), 'enabled');
  t.is(types.availability('example'), 'not-enabled');
  t.is(types.availability('warpnic'), 'unknown');
  t.deepEqual(types.get('p2p'), { n: 1 });
  t.deepEqual(types.values(), [{ n: 1 }]);
});

test('a name registers once, and only before the registry is sealed', (t) => {
  const types = new TypeRegistry<number>('nic-type', 'nictype', catalog);
  types.register('p2p', 1);
  t.throws(() => types.register('p2p', 2), { message: 'nictype "p2p" is registered twice' });
  types.seal();
  t.throws(() => types.register('routed', 3), { message: /nictype "routed" must be registered during the register phase/ });
  t.is(types.get('routed'), undefined);
});
