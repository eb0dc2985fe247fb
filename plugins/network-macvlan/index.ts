/** The `macvlan` network type plugin: registers MacvlanDriver with the networks family. */
import { definePlugin, NetworkTypesExtensionPointRef } from '../../sdk/index.js';
import { MacvlanDriver } from './driver.js';

export default definePlugin({
  register(ctx) {
    const networks = ctx.extensionPoints.get(NetworkTypesExtensionPointRef);
    if (!networks) throw new Error('the network-macvlan plugin needs the "networks" extension point');
    networks.registerDriver(new MacvlanDriver());
  },
});
