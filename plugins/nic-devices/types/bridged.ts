/** `bridged`: a veth pair whose host end joins a bridge (a managed bridge network or any host bridge). */
import { badRequest, truthy, type NicType } from '../../../sdk/index.js';
import { addressList } from '../addresses.js';
import { checkBuiltinNic, isBridge, OPTIONS } from '../options.js';
import { hostEnd, readSys, type BuiltinDeps } from './deps.js';

export function bridgedNic(deps: BuiltinDeps): NicType {
  return {
    nictype: 'bridged',
    options: OPTIONS.bridged,
    networkTypes: ['bridge'],
    validate: checkBuiltinNic,

    async check(config, ctx) {
      if (!config['ipv4.address'] && !config['ipv6.address']) return;
      const networks = deps.networks();
      const net = config.parent && networks ? await networks.get(ctx.project, config.parent).catch(() => undefined) : undefined;
      if (net?.type !== 'bridge') throw new Error(`static addresses need a managed bridge network as the parent ("${config.parent}" is not one)`);
    },

    async start(s) {
      const c = s.config;
      if (!isBridge(s.parent!)) throw badRequest(`Device "${s.name}": parent "${s.parent}" is not a bridge`);
      if (!s.network && (c['ipv4.address'] || c['ipv6.address'])) {
        throw badRequest(`Device "${s.name}": static addresses need a managed bridge network as the parent ("${s.parent}" is not one)`);
      }
      if ((truthy(c['security.ipv4_filtering']) || truthy(c['security.ipv6_filtering'])) && !s.network) {
        throw badRequest(`Device "${s.name}": IP filtering needs a managed bridge network as the parent`);
      }
      hostEnd(s);
      s.nic.link = s.parent;
      if (!s.mtu) s.nic.mtu = Number(readSys(s.parent!, 'mtu')) || undefined;
      const networks = deps.networks();
      if (s.network && networks) {
        await networks.nicPlugged(s.project, s.network, {
          project: s.project, instance: s.instanceName, device: s.name, hwaddr: s.nic.hwaddr!,
          ipv4: c['ipv4.address'] || undefined, ipv6: c['ipv6.address'] || undefined, hostName: s.nic.hostName,
        });
      }
    },

    /** VLANs, isolation and filters on the bridge port, then the traffic limits. */
    async started(ctx) {
      const c = ctx.config;
      const nic = ctx.run.nics?.[0];
      if (!nic || nic.kind !== 'veth' || !nic.hostName) return;
      const port = nic.hostName;
      if (nic.link) {
        await deps.host.bridgeVlans(nic.link, port, c.vlan, (c['vlan.tagged'] ?? '').split(',').map((v) => v.trim()).filter(Boolean));
        if (truthy(c['security.port_isolation'])) await deps.host.portIsolation(port);
        const v4 = truthy(c['security.ipv4_filtering']) ? addressList(c['ipv4.address']) : undefined;
        const v6 = truthy(c['security.ipv6_filtering']) ? addressList(c['ipv6.address']) : undefined;
        if (truthy(c['security.mac_filtering']) || v4 || v6) {
          await deps.filters.apply({ port, hwaddr: nic.hwaddr!, mac: truthy(c['security.mac_filtering']), ipv4: v4, ipv6: v6 });
        }
      }
      await deps.host.limits(port, c['limits.ingress'] || c['limits.max'], c['limits.egress'] || c['limits.max']);
    },
  };
}
