/** The `physical` network type plugin: registers PhysicalDriver with the networks family. */
import { definePlugin, NetworksServiceRef } from '../../sdk/index.js';
import { PhysicalDriver } from './driver.js';

export default definePlugin({
  register(ctx) {
    const networks = ctx.services.get(NetworksServiceRef);
    if (!networks) throw new Error('the network-physical plugin needs the "networks" service');
    networks.registerDriver(new PhysicalDriver(ctx.hostTools, ctx.dataDir));
  },
});
