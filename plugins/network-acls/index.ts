/**
 * network-acls: /1.0/network-acls (project-aware through `features.networks`) and their
 * enforcement on bridge networks (`security.acls`, added to the bridge type as a network policy).
 */
import { definePlugin, featureScopedRoute, NetworksServiceRef, type PluginContext } from '../../sdk/index.js';
import { AclFirewall } from './firewall.js';
import { AclManager } from './manager.js';
import { ACL_NETWORK_KEYS } from './network-keys.js';
import { aclRoutes } from './routes.js';

const managers = new WeakMap<PluginContext, AclManager>();

export default definePlugin({
  register(ctx) {
    const networks = ctx.services.get(NetworksServiceRef);
    if (!networks) throw new Error('the network-acls plugin needs the "networks" service');
    const acls = new AclManager(ctx, new AclFirewall(ctx.hostTools, ctx.dataDir), () => ctx.services.get(NetworksServiceRef));
    managers.set(ctx, acls);
    networks.addPolicy({
      configKeys: { types: ['bridge'], keys: ACL_NETWORK_KEYS },
      check: (net) => acls.checkNetwork(net),
      applied: (net) => acls.networkApplied(net),
      removed: (net) => acls.networkRemoved(net),
    });
    for (const route of aclRoutes(acls)) ctx.routes.add(featureScopedRoute(ctx.services, 'networks', route));
  },

  async boot(ctx) {
    // Rules of networks gone while no daemon ran go now; the networks family re-applies the rest.
    await managers.get(ctx)!.reset().catch((err) => ctx.log.error({ err }, 'resetting the network ACL rules failed'));
  },
});
