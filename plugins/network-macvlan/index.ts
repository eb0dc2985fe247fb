/** The `macvlan` network type plugin: registers MacvlanDriver with the networks family. */
import { definePlugin, NetworksServiceRef } from '../../sdk/index.js';
import { MacvlanDriver } from './driver.js';

export default definePlugin({
  register(ctx) {
    const networks = ctx.services.get(NetworksServiceRef);
    if (!networks) throw new Error('the network-macvlan plugin needs the "networks" service');
    networks.registerDriver(new MacvlanDriver());
  },
});
