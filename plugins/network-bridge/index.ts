/** The `bridge` network type plugin: registers BridgeDriver with the networks family. */
import { definePlugin, NetworkTypesExtensionPointRef } from '../../sdk/index.js';
import { BridgeDriver } from './driver.js';

export default definePlugin({
  register(ctx) {
    const networks = ctx.extensionPoints.get(NetworkTypesExtensionPointRef);
    if (!networks) throw new Error('the network-bridge plugin needs the "networks" extension point');
    networks.registerDriver(new BridgeDriver({ tools: ctx.hostTools, dataDir: ctx.dataDir, warnings: ctx.warnings, log: ctx.log }));
  },
});
