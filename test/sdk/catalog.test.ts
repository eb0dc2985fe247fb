import test from 'ava';
import path from 'node:path';
import { EXTENSION_CATALOG, SPEC_SPELLINGS, catalogPosition, isCatalogName, twinOf } from '../../sdk/index.js';
import { readRegistry, resolvePluginSet, PluginSetError } from '../../kernel/loader/plugin-set.js';
import { projectRoot } from '../helpers/daemon.js';

test('the catalog has no duplicates and keeps the reference order with the spec spellings beside their twins', (t) => {
  t.is(new Set(EXTENSION_CATALOG).size, EXTENSION_CATALOG.length);
  t.is(EXTENSION_CATALOG[0], 'storage_zfs_remove_snapshots');
  t.true(Object.keys(SPEC_SPELLINGS).length >= 4);
  for (const [spec, reference] of Object.entries(SPEC_SPELLINGS)) {
    t.is(catalogPosition(spec), catalogPosition(reference) + 1, spec);
    t.is(twinOf(spec), reference);
    t.is(twinOf(reference), spec);
  }
  t.is(SPEC_SPELLINGS.proxy_priv_drop, 'unix_priv_drop');
  t.true(catalogPosition('etag') < catalogPosition('patch'));
  t.true(catalogPosition('warnings') < catalogPosition('metrics'));
  // Placeholders of the spec resolve to the real names.
  for (const name of ['nvidia_runtime', 'nvidia_runtime_config', 'maas_network', 'lxc_features', 'proxy_haproxy_protocol', 'restrict_devlxd', 'devlxd_events', 'devlxd_images']) {
    t.true(isCatalogName(name), name);
  }
});

test('every claim in plugin-registry.json is a catalog name, claimed once', (t) => {
  const registry = readRegistry(path.join(projectRoot, 'plugin-registry.json'));
  const owners = new Map<string, string>();
  const claims: [string, string[]][] = [['kernel', registry.kernel?.provides?.extensions ?? []], ...registry.plugins.map((p) => [p.id, p.provides?.extensions ?? []] as [string, string[]])];
  for (const [owner, names] of claims) {
    for (const name of names) {
      t.true(isCatalogName(name), `${owner} claims ${name}`);
      t.is(owners.get(name), undefined, `${name} claimed by ${owners.get(name)} and ${owner}`);
      owners.set(name, owner);
    }
  }
  t.true(owners.size > 0);
});

test('a feature with two spellings is claimed under both, so clients looking for either find it', (t) => {
  const registry = readRegistry(path.join(projectRoot, 'plugin-registry.json'));
  const claims: [string, string[]][] = [['kernel', registry.kernel?.provides?.extensions ?? []], ...registry.plugins.map((p) => [p.id, p.provides?.extensions ?? []] as [string, string[]])];
  for (const [owner, names] of claims) {
    for (const name of names) {
      const twin = twinOf(name);
      if (twin !== undefined) t.true(names.includes(twin), `${owner} claims ${name} but not ${twin}`);
    }
  }
  const all = claims.flatMap(([, names]) => names);
  // The reference's names that clients test for, beside the spec's.
  for (const name of ['unix_priv_drop', 'proxy_priv_drop', 'snapshot_schedule_aliases', 'snapshots_schedule_aliases']) t.true(all.includes(name), name);
});

test('the loader refuses a manifest that claims one spelling of a feature without the other', (t) => {
  const registry = {
    plugins: [{ id: 'proxy', entry: 'x.js', version: '1.0.0', sdk: '*', provides: { extensions: ['proxy', 'proxy_priv_drop'] } }],
  };
  const err = t.throws(() => resolvePluginSet(registry, 'proxy', '/'), { instanceOf: PluginSetError });
  t.true(err!.problems.includes('proxy claims api extension "proxy_priv_drop" but not its other spelling "unix_priv_drop"; claim both'), err!.problems.join('\n'));
  registry.plugins[0]!.provides.extensions.push('unix_priv_drop');
  t.notThrows(() => resolvePluginSet(registry, 'proxy', '/'));
});
