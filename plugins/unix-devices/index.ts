/**
 * unix-devices: the `unix-char` and `unix-block` device types (a host device node given to a
 * container at a path of its /dev, at start or hot-plugged), registered with the instances family.
 */
import { definePlugin, InstancesExtensionPointRef } from '../../sdk/index.js';
import { UnixDevice } from './unix-device.js';

export default definePlugin({
  register(ctx) {
    const instances = ctx.extensionPoints.get(InstancesExtensionPointRef);
    if (!instances) throw new Error('the unix-devices plugin needs the "instances" extension point');
    instances.registerDeviceType(new UnixDevice('unix-char'));
    instances.registerDeviceType(new UnixDevice('unix-block'));
  },
});
