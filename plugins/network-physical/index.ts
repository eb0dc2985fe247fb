/** The `physical` network type plugin: registers PhysicalDriver with the networks family. */
import { definePlugin, NetworkTypesExtensionPointRef } from '../../sdk/index.js';
import { PhysicalDriver } from './driver.js';

export default definePlugin({
  register(ctx) {
    const networks = ctx.extensionPoints.get(NetworkTypesExtensionPointRef);
    if (!networks) throw new Error('the network-physical plugin needs the "networks" extension point');
    networks.registerDriver(new PhysicalDriver(ctx.hostTools, ctx.dataDir));
  },
});
