/**
 * The resources plugin: `GET /1.0/resources`, the host's hardware read afresh from /proc, /sys,
 * /dev and /run on every request (no process is spawned, nothing is cached but the parsed
 * pci.ids/usb.ids, revalidated against the file each time). `?target=` is the kernel's business.
 */
import { definePlugin, sync } from '../../sdk/index.js';
import { collectResources } from './collect.js';
import { HostReader } from './sysfs.js';

export default definePlugin({
  register(ctx) {
    ctx.routes.add({
      path: '/1.0/resources',
      extension: 'resources',
      get: {
        description: 'Hardware resources of this server',
        access: 'filtered',
        handler: async () => sync(await collectResources(new HostReader())),
      },
    });
  },
});
