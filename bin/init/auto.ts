/**
 * What `init --auto` asks for, worked out from the server as it is (like the reference's auto init):
 * a `dir` pool named `default` with a root disk in the default profile when there is no pool yet,
 * and a managed bridge with an `eth0` NIC on it in the default profile when there is no managed
 * network and the default profile has no NIC. The bridge's subnets are `auto`: the bridge driver
 * picks free private ones from the host's own routes and addresses, and turns NAT on.
 */
import { existsSync } from 'node:fs';
import { must, type ApiCall } from './api.js';
import type { Preseed } from './preseed.js';

/** Bridge names are host-wide, so the first `corralbr<N>` no interface on the host has yet. */
export const BRIDGE_PREFIX = 'corralbr';

/**
 * `CORRAL_INIT_NETWORK`: unset for the default bridge, `none` for no network, or the name of the
 * bridge to make (tests give each daemon its own).
 */
export type NetworkChoice = { kind: 'default' } | { kind: 'none' } | { kind: 'named'; name: string };

export function networkChoice(env: NodeJS.ProcessEnv): NetworkChoice {
  const value = env.CORRAL_INIT_NETWORK?.trim();
  if (!value) return { kind: 'default' };
  if (value === 'none') return { kind: 'none' };
  return { kind: 'named', name: value };
}

export async function autoPreseed(api: ApiCall, choice: NetworkChoice): Promise<Preseed> {
  const preseed: Preseed = {};
  const devices: Record<string, Record<string, string>> = {};

  const pools = await must(api, 'GET', '/1.0/storage-pools', undefined, 'listing storage pools') as string[];
  if (pools.length === 0) {
    preseed.storage_pools = [{ name: 'default', driver: 'dir' }];
    devices.root = { type: 'disk', path: '/', pool: 'default' };
  }

  if (choice.kind !== 'none') {
    const networks = await must(api, 'GET', '/1.0/networks?recursion=1', undefined, 'listing networks') as { name: string; managed: boolean }[];
    const profile = await must(api, 'GET', '/1.0/profiles/default', undefined, 'reading the default profile');
    const hasNic = Object.values<Record<string, string>>(profile.devices ?? {}).some((d) => d.type === 'nic');
    if (!networks.some((n) => n.managed) && !hasNic) {
      const taken = new Set(networks.map((n) => n.name));
      let name = choice.kind === 'named' ? choice.name : '';
      for (let i = 0; !name; i++) {
        const candidate = `${BRIDGE_PREFIX}${i}`;
        if (!taken.has(candidate) && !existsSync(`/sys/class/net/${candidate}`)) name = candidate;
      }
      // Empty config: the bridge driver fills ipv4/ipv6 `auto` and NAT on, as the reference's does.
      preseed.networks = [{ name, type: 'bridge', config: {} }];
      devices.eth0 = { type: 'nic', network: name, name: 'eth0' };
    }
  }

  if (Object.keys(devices).length) preseed.profiles = [{ name: 'default', devices }];
  return preseed;
}
