/** The `bridge` network type plugin: registers BridgeDriver with the networks family. */
import { definePlugin, NetworksServiceRef } from '../../sdk/index.js';
import { BridgeDriver } from './driver.js';

export default definePlugin({
  register(ctx) {
    const networks = ctx.services.get(NetworksServiceRef);
    if (!networks) throw new Error('the network-bridge plugin needs the "networks" service');
    networks.registerDriver(new BridgeDriver({ tools: ctx.hostTools, dataDir: ctx.dataDir, warnings: ctx.warnings, log: ctx.log }));
  },
});
