/**
 * nic-devices: the `nic` device type for instances, registered with the instances family, and the
 * NIC type extension point (NicTypesExtensionPointRef) that its own nictypes (bridged, macvlan, p2p,
 * routed, physical; or a managed `network`) and other plugins' fill. The instance driver makes the
 * interfaces; the nictypes decide them and do the host-side work around them.
 */
import { definePlugin, InstancesExtensionPointRef, NicTypesExtensionPointRef, NicTypesServiceRef, type PluginContext } from '../../sdk/index.js';
import { NicDevice } from './nic.js';
import { NicTypes } from './nic-types.js';
import { hostInterfaceExists } from './options.js';

const devices = new WeakMap<PluginContext, { nic: NicDevice; types: NicTypes }>();

export default definePlugin({
  register(ctx) {
    const instances = ctx.extensionPoints.get(InstancesExtensionPointRef);
    if (!instances) throw new Error('the nic-devices plugin needs the "instances" extension point');
    const types = new NicTypes(ctx.catalog);
    const nic = new NicDevice(ctx, types);
    devices.set(ctx, { nic, types });
    ctx.extensionPoints.provide(NicTypesExtensionPointRef, { registerNicType: (type) => types.register(type) });
    ctx.services.provide(NicTypesServiceRef, { nicType: (name) => types.get(name) });
    instances.registerDeviceType(nic);
  },

  async boot(ctx) {
    const { nic, types } = devices.get(ctx)!;
    types.seal();
    // Filters of interfaces that went away while no daemon ran, once the API is open: one nft listing on
    // every boot's way to a serving socket otherwise, and the filters' own queue puts any new filter after it.
    ctx.hooks.serving.tap(() => void nic.filters.leftovers(hostInterfaceExists).catch((err) => ctx.log.warn({ err }, 'removing leftover NIC filters failed')));
  },
});
