/**
 * network-forwards: /1.0/networks/{name}/forwards on bridge networks (listen address and ports to
 * target addresses inside the network), enforced as DNAT rules. Forwards follow their network
 * through the networks family's policy hook: deleted with it, renamed with it.
 */
import { definePlugin, featureScopedRoute, NetworksServiceRef, type PluginContext } from '../../sdk/index.js';
import { ForwardFirewall } from './firewall.js';
import { ForwardManager } from './manager.js';
import { forwardRoutes } from './routes.js';

const managers = new WeakMap<PluginContext, ForwardManager>();

export default definePlugin({
  register(ctx) {
    const networks = ctx.services.get(NetworksServiceRef);
    if (!networks) throw new Error('the network-forwards plugin needs the "networks" service');
    const forwards = new ForwardManager(ctx, new ForwardFirewall(ctx.hostTools, ctx.dataDir), networks);
    managers.set(ctx, forwards);
    networks.addPolicy({ removed: (net, renamedTo) => forwards.networkRemoved(net, renamedTo) });
    for (const route of forwardRoutes(forwards)) ctx.routes.add(featureScopedRoute(ctx.services, 'networks', route));
  },

  async boot(ctx) {
    await managers.get(ctx)!.reset().catch((err) => ctx.log.error({ err }, 'writing the network forward rules failed'));
  },
});
