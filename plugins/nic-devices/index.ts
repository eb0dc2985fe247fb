/**
 * nic-devices: the `nic` device type for instances (bridged, macvlan, p2p, routed, physical, or a
 * managed `network`), registered with the instances family. The instance driver makes the
 * interfaces; this plugin decides them and does the host-side work around them.
 */
import { definePlugin, InstancesExtensionPointRef, type PluginContext } from '../../sdk/index.js';
import { NicDevice } from './nic.js';
import { hostInterfaceExists } from './options.js';

const devices = new WeakMap<PluginContext, NicDevice>();

export default definePlugin({
  register(ctx) {
    const instances = ctx.extensionPoints.get(InstancesExtensionPointRef);
    if (!instances) throw new Error('the nic-devices plugin needs the "instances" extension point');
    const nic = new NicDevice(ctx);
    devices.set(ctx, nic);
    instances.registerDeviceType(nic);
  },

  async boot(ctx) {
    // Filters of interfaces that went away while no daemon ran.
    await devices.get(ctx)!.filters.leftovers(hostInterfaceExists).catch((err) => ctx.log.warn({ err }, 'removing leftover NIC filters failed'));
  },
});
