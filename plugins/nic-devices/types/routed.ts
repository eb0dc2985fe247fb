/**
 * `routed`: a veth pair with the instance's addresses set inside and routed to it from the host
 * (host end addresses as gateways, proxy neighbour entries on the parent).
 */
import type { NicType } from '../../../sdk/index.js';
import { addressList } from '../addresses.js';
import { checkBuiltinNic, OPTIONS } from '../options.js';
import { hostEnd, readSys, type BuiltinDeps } from './deps.js';

export function routedNic(deps: BuiltinDeps): NicType {
  return {
    nictype: 'routed',
    options: OPTIONS.routed,
    validate: checkBuiltinNic,

    async start(s) {
      const c = s.config;
      const nic = s.nic;
      hostEnd(s);
      nic.ipv4 = addressList(c['ipv4.address']).map((a) => `${a}/32`);
      nic.ipv6 = addressList(c['ipv6.address']).map((a) => `${a}/128`);
      if (nic.ipv4.length && (c['ipv4.gateway'] ?? 'auto') === 'auto') nic.ipv4Gateway = c['ipv4.host_address'] || '169.254.0.1';
      if (nic.ipv6.length && (c['ipv6.gateway'] ?? 'auto') === 'auto') nic.ipv6Gateway = c['ipv6.host_address'] || 'fe80::1';
      if (s.parent && !s.mtu) nic.mtu = Number(readSys(s.parent, 'mtu')) || undefined;
    },

    async started(ctx) {
      const c = ctx.config;
      const port = ctx.run.nics?.[0]?.hostName;
      if (!port) return;
      await deps.host.limits(port, c['limits.ingress'] || c['limits.max'], c['limits.egress'] || c['limits.max']);
      const v4 = addressList(c['ipv4.address']);
      const v6 = addressList(c['ipv6.address']);
      await deps.host.addresses(port, v4.length ? c['ipv4.host_address'] || '169.254.0.1' : undefined, v6.length ? c['ipv6.host_address'] || 'fe80::1' : undefined);
      await deps.host.routes(port, v4.map((a) => `${a}/32`), v6.map((a) => `${a}/128`), c['ipv4.host_table'], c['ipv6.host_table']);
      if (c.parent) await deps.host.proxyNeighbours(c.parent, v4, v6);
    },

    /** Routes in a host table and proxy neighbour entries outlive the host end. */
    async stop(ctx) {
      const c = ctx.config;
      const v4 = addressList(c['ipv4.address']);
      const v6 = addressList(c['ipv6.address']);
      await deps.host.removeRoutes(v4.map((a) => `${a}/32`), v6.map((a) => `${a}/128`), c['ipv4.host_table'], c['ipv6.host_table']);
      if (c.parent) await deps.host.proxyNeighbours(c.parent, v4, v6, true);
    },
  };
}
