/**
 * guest-socket: `/dev/lxd/sock` inside containers (devlxd). Each running container gets a socket
 * of its own that answers about that container only: its `user.*` config, devices, cloud-init
 * meta-data, events of its own changes and, with `security.devlxd.images`, image exports.
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import {
  definePlugin, ImagesServiceRef, InstanceHooksRef, InstancesServiceRef, isBool,
  type LifecycleMetadata, type PluginContext,
} from '../../sdk/index.js';
import { GuestSockets } from './sockets.js';

/** Per kernel: several test kernels may load this module in one process. */
const sockets = new WeakMap<PluginContext, GuestSockets>();

export default definePlugin({
  register(ctx) {
    ctx.keys.register({ key: 'security.devlxd', scope: 'instance', type: 'bool', default: 'true', validate: isBool, extension: 'restrict_devlxd',
      doc: 'Give the container /dev/lxd/sock (turning it off closes the socket at once; the directory goes at the next start)' });
    ctx.keys.register({ key: 'security.devlxd.images', scope: 'instance', type: 'bool', default: 'false', validate: isBool, extension: 'devlxd_images',
      doc: 'Let the container export its project\'s images through /dev/lxd/sock' });
    ctx.keys.register({ key: 'volatile.cloud-init.instance-id', scope: 'instance', type: 'string',
      doc: 'The instance id cloud-init sees in /dev/lxd/sock meta-data (a UUID given at creation)' });
    const own = new GuestSockets(path.join(ctx.dataDir, 'devlxd'), {
      location: () => ctx.serverName,
      images: () => ctx.services.get(ImagesServiceRef),
    }, () => ctx.services.get(InstancesServiceRef), ctx.log);
    sockets.set(ctx, own);
    const hooks = ctx.services.get(InstanceHooksRef);
    if (!hooks) throw new Error('the guest-socket plugin needs the instances family\'s hooks');
    // As the reference does, every new instance gets an id of its own for cloud-init (a copy too: it is another machine).
    hooks.creating.tap('guest-socket', (draft) => {
      if (draft.origin === 'copy' || !draft.config['volatile.cloud-init.instance-id']) draft.config['volatile.cloud-init.instance-id'] = randomUUID();
    });
    hooks.launchMounts.tapPromise('guest-socket', async (launch) => {
      const mount = await own.launch(launch.instance);
      if (mount) launch.mounts.push(mount);
    });
    hooks.stopped.tap('guest-socket', (s) => void own.forget(s.project, s.name).catch((err) => ctx.log.warn({ err }, 'closing a guest socket failed')));
    hooks.removed.tapPromise('guest-socket', (ref) => own.forget(ref.project, ref.name));
    ctx.events.subscribe((event) => follow(ctx, own, event.project ?? 'default', event.metadata as LifecycleMetadata), ['lifecycle']);
  },
  async boot(ctx) {
    // The API does not wait for it: guests of running containers get their sockets back shortly after (sockets.ts).
    ctx.hooks.serving.tap(() => void sockets.get(ctx)?.resume().catch((err) => ctx.log.warn({ err }, 'guest sockets could not listen again')));
  },
  async shutdown(ctx) {
    await sockets.get(ctx)?.closeAll();
  },
});

/** Lifecycle actions after which an instance's config or devices may differ. */
const INSTANCE_CHANGES = new Set(['instance-updated', 'instance-restored']);

/** Edits of an instance (or a restore of its snapshot) or of a profile change what guests see. */
function follow(ctx: PluginContext, own: GuestSockets, project: string, meta: LifecycleMetadata): void {
  const failed = (err: unknown) => ctx.log.warn({ err }, 'refreshing a guest socket failed');
  if (meta.action === 'profile-updated') {
    own.refreshAll().catch(failed);
    return;
  }
  if (!INSTANCE_CHANGES.has(meta.action)) return;
  const m = /^\/1\.0\/instances\/([^/?]+)/.exec(meta.source);
  if (m) own.refresh(project, [decodeURIComponent(m[1]!)]).catch(failed);
}
