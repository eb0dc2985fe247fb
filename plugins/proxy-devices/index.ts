/**
 * proxy-devices: the `proxy` device type (TCP, UDP and unix socket forwarding between the host
 * and an instance, in either direction), registered with the instances family.
 */
import { definePlugin, InstancesServiceRef } from '../../sdk/index.js';
import { ProxyDevice } from './proxy.js';

export default definePlugin({
  register(ctx) {
    const instances = ctx.services.get(InstancesServiceRef);
    if (!instances) throw new Error('the proxy-devices plugin needs the "instances" service');
    instances.registerDeviceType(new ProxyDevice(ctx));
  },
});
