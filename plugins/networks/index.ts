/**
 * The networks family host: managed network records and routes, the host's unmanaged interfaces,
 * and the extension point for network types (NetworkTypesExtensionPointRef).
 */
import {
  badRequest, createUsedByRegistry, definePlugin, featureProjectOf, featureScopedRoute, NetworksServiceRef, NetworkTypesExtensionPointRef, Stage,
  type NetworkInfo, type NetworkNicSettings, type NetworksService, type PluginContext,
} from '../../sdk/index.js';
import { NetworkDriverTable } from './drivers.js';
import { NetworkManager } from './manager.js';
import { networkRoutes } from './routes.js';
import { HostInterfaceList } from './host-interface-list.js';
import { addDeviceUsers } from './used-by.js';

/** Per kernel: several test kernels may load this module in one process. */
const managers = new WeakMap<PluginContext, NetworkManager>();

export default definePlugin({
  register(ctx) {
    const drivers = new NetworkDriverTable(ctx.keys, ctx.catalog);
    const usedBy = createUsedByRegistry();
    const manager = new NetworkManager(ctx, drivers, usedBy);
    managers.set(ctx, manager);
    addDeviceUsers(usedBy, ctx.services);

    const resolve = async (project: string, name: string): Promise<NetworkInfo> => {
      const home = await featureProjectOf(ctx.services, project, 'networks');
      const { doc } = await manager.get(home, name);
      manager.driverOf(doc);
      return manager.info(home, doc);
    };
    const nicSettings = async (project: string, name: string): Promise<NetworkNicSettings> => {
      const net = await resolve(project, name);
      if (manager.status(net.project, net.name) === 'Unavailable') throw badRequest(`Network "${name}" is unavailable`);
      const driver = drivers.get(net.type)!;
      return driver.nicSettings?.(net) ?? { parent: driver.interfaceName(net) };
    };
    ctx.extensionPoints.provide(NetworkTypesExtensionPointRef, { registerDriver: (driver) => drivers.register(driver) });
    const service: NetworksService = {
      addPolicy: (policy) => {
        if (policy.configKeys) drivers.addKeys(policy.configKeys.types, policy.configKeys.keys);
        manager.policies.push(policy);
      },
      get: resolve,
      list: async (project) => manager.list(await featureProjectOf(ctx.services, project, 'networks')),
      parentInterface: async (project, name) => (await nicSettings(project, name)).parent,
      nicSettings: (project, name) => nicSettings(project, name),
      nicPlugged: async (project, network, nic) => {
        const net = await resolve(project, network);
        await drivers.get(net.type)!.nics?.plugged(net, nic);
      },
      nicUnplugged: async (project, network, nic) => {
        const net = await resolve(project, network);
        await drivers.get(net.type)!.nics?.unplugged(net, nic);
      },
      usedBy,
    };
    ctx.services.provide(NetworksServiceRef, service);
    const hostInterfaces = new HostInterfaceList(ctx.hostTools, ctx.log);
    for (const route of networkRoutes(manager, ctx.hostTools, ctx.services, hostInterfaces)) ctx.routes.add(featureScopedRoute(ctx.services, 'networks', route));
    ctx.hooks.shutdown.tap(async () => hostInterfaces.stop());
    // Late: instances stop first on a host shutdown, then their networks go.
    ctx.hooks.shutdown.tap((info) => manager.shutdown(info.hostShutdown), { stage: Stage.LATE });
    // Becoming a cluster member: the first member's networks become the cluster's; a joiner brings up its part of each.
    ctx.hooks.clusterJoined.tap((info) => (info.bootstrap ? manager.parts.split() : manager.parts.join(info.memberConfig)));
    ctx.hooks.memberConfigKeys.tap(async (entries) => [...entries, ...(await manager.parts.keysForJoiners())]);
  },

  async boot(ctx) {
    managers.get(ctx)!.drivers.seal();
    await managers.get(ctx)!.startAll();
  },
});
