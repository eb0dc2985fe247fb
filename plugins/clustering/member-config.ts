/**
 * `member_config` of GET /1.0/cluster: the keys of storage pools and networks that each member sets
 * for itself, which a joining server gives in `member_config` (what `lxd init` asks for when joining).
 */
import type { NetworksService, StorageService } from '../../sdk/index.js';

export interface MemberConfigKey {
  entity: 'storage-pool' | 'network';
  name: string;
  key: string;
  value: string;
  description: string;
}

/** Member-specific keys as the reference defines them. */
const POOL_KEYS = ['source', 'size', 'zfs.pool_name', 'lvm.thinpool_name', 'lvm.vg_name'];
const NETWORK_KEYS = ['bridge.external_interfaces', 'parent'];

export async function memberConfigKeys(storage: StorageService | undefined, networks: NetworksService | undefined): Promise<MemberConfigKey[]> {
  const keys: MemberConfigKey[] = [];
  for (const name of (await storage?.poolNames().catch(() => [])) ?? []) {
    const pool = await storage!.pool(name).catch(() => undefined);
    for (const key of POOL_KEYS) {
      if (pool?.config[key] === undefined) continue;
      keys.push({ entity: 'storage-pool', name, key, value: '', description: `"${key}" property for storage pool "${name}"` });
    }
  }
  for (const network of (await networks?.list('default').catch(() => [])) ?? []) {
    for (const key of NETWORK_KEYS) {
      if (network.config[key] === undefined) continue;
      keys.push({ entity: 'network', name: network.name, key, value: '', description: `"${key}" property for network "${network.name}"` });
    }
  }
  return keys;
}
