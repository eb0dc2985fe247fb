import test from 'ava';
import path from 'node:path';
import { EXTENSION_CATALOG, catalogPosition, isCatalogName } from '../../sdk/index.js';
import { readRegistry } from '../../kernel/loader/plugin-set.js';
import { projectRoot } from '../helpers/daemon.js';

test('the catalog has no duplicates and keeps the reference order with the spec spellings beside their twins', (t) => {
  t.is(new Set(EXTENSION_CATALOG).size, EXTENSION_CATALOG.length);
  t.is(EXTENSION_CATALOG[0], 'storage_zfs_remove_snapshots');
  for (const [reference, spec] of [['virtual-machines', 'virtual_machines'], ['snapshot_schedule_aliases', 'snapshots_schedule_aliases'], ['macaroon_authentication', 'external_authentication'], ['unix_priv_drop', 'proxy_priv_drop']]) {
    t.is(catalogPosition(spec!), catalogPosition(reference!) + 1, spec);
  }
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
