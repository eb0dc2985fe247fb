/**
 * unix-devices: the `unix-char` and `unix-block` device types (a host device node given to a
 * container at a path of its /dev, at start or hot-plugged) and `unix-hotplug` (every host node
 * matching vendor, product or subsystem ids, following the host's device announcements),
 * registered with the instances family.
 */
import { definePlugin, InstancesExtensionPointRef } from '../../sdk/index.js';
import { HostAnnouncements } from './host-announcements.js';
import { UnixDevice } from './unix-device.js';
import { UnixHotplug } from './unix-hotplug.js';

export default definePlugin({
  register(ctx) {
    const instances = ctx.extensionPoints.get(InstancesExtensionPointRef);
    if (!instances) throw new Error('the unix-devices plugin needs the "instances" extension point');
    // One reader of the kernel's announcements per daemon, started when a device first follows the host.
    const announcements = new HostAnnouncements(ctx.hostTools, ctx.log);
    instances.registerDeviceType(new UnixDevice('unix-char', announcements));
    instances.registerDeviceType(new UnixDevice('unix-block', announcements));
    instances.registerDeviceType(new UnixHotplug(announcements));
    ctx.hooks.shutdown.tap(async () => announcements.close());
  },
});
