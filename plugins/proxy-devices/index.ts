/**
 * proxy-devices: the `proxy` device type (TCP, UDP and unix socket forwarding between the host
 * and an instance, in either direction), registered with the instances family.
 */
import { definePlugin, InstancesExtensionPointRef } from '../../sdk/index.js';
import { ProxyDevice } from './proxy.js';

export default definePlugin({
  register(ctx) {
    const instances = ctx.extensionPoints.get(InstancesExtensionPointRef);
    if (!instances) throw new Error('the proxy-devices plugin needs the "instances" extension point');
    instances.registerDeviceType(new ProxyDevice(ctx));
  },
});
