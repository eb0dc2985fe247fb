/**
 * Instances and snapshots as image sources (`POST /1.0/images` with `source.type` instance,
 * container, virtual-machine or snapshot). The instance's lock is held from open to release, so
 * it cannot start, change or lose a snapshot while the images plugin reads its volume; the
 * volume is read in place, nothing is copied.
 */
import {
  badRequest, notFound,
  type ImageSourceContent, type ImageSourceProvider, type ImagesService, type KeyedLock, type PluginContext,
} from '../../sdk/index.js';
import type { InstanceHandle } from './access.js';
import type { InstanceManager } from './manager.js';
import { snapshotKey, type SnapshotRecord } from './snapshots/record.js';

/** Take `key` until the returned function is called (KeyedLock itself only runs functions). */
async function hold(lock: KeyedLock, key: string): Promise<() => Promise<void>> {
  let taken!: () => void;
  let free!: () => void;
  const isTaken = new Promise<void>((resolve) => (taken = resolve));
  const freed = new Promise<void>((resolve) => (free = resolve));
  const done = lock.run(key, async () => {
    taken();
    await freed;
  });
  await isTaken;
  let released = false;
  return async () => {
    if (released) return;
    released = true;
    free();
    await done;
  };
}

/** The `image.*` keys without the prefix: what the instance says about its image. */
function imageProperties(config: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(config)) if (key.startsWith('image.')) out[key.slice('image.'.length)] = value;
  return out;
}

/**
 * Load under the instance's lock; `use` answers the content, and the lock is given back when it
 * throws or when the content is released.
 */
async function openLocked(
  manager: InstanceManager, project: string, instance: string,
  use: (handle: InstanceHandle) => Promise<Omit<ImageSourceContent, 'release'>>,
): Promise<ImageSourceContent> {
  const unlock = await hold(manager.lock, `${project}/${instance}`);
  try {
    const content = await use(await manager.load(project, instance));
    return { ...content, release: unlock };
  } catch (err) {
    await unlock();
    throw err;
  }
}

const INSTANCE_TYPES = new Set(['container', 'virtual-machine']);

export function registerImageSources(ctx: PluginContext, manager: InstanceManager, images: ImagesService): void {
  const snapshots = ctx.store.collection<SnapshotRecord>('snapshots');

  const instanceSource: ImageSourceProvider = {
    type: 'instance',
    async open(project, source) {
      const name = String(source.name);
      if (name.includes('/')) throw badRequest('This is a snapshot');
      return openLocked(manager, project, name, async (handle) => {
        // `container` and `virtual-machine` name the type they expect, as the reference filters.
        if (INSTANCE_TYPES.has(String(source.type)) && source.type !== handle.record.type) throw notFound('Instance not found');
        const status = await handle.driver.status(handle.inst);
        if (status === 'Running' || status === 'Frozen') throw badRequest('Cannot export a running instance as an image');
        if (status !== 'Stopped') throw badRequest(`Cannot export the instance as an image: its state is ${status}`);
        if (!handle.inst.volumePath) throw badRequest('Cannot export the instance as an image: its storage pool is unavailable');
        return {
          dir: handle.inst.volumePath,
          architecture: handle.record.architecture,
          type: handle.record.type,
          properties: imageProperties(handle.record.config),
        };
      });
    },
  };

  const snapshotSource: ImageSourceProvider = {
    type: 'snapshot',
    async open(project, source) {
      const name = String(source.name);
      const slash = name.indexOf('/');
      if (slash < 0) throw badRequest('Not a snapshot');
      const instance = name.slice(0, slash);
      const snap = name.slice(slash + 1);
      if (!instance || !snap) throw notFound('Snapshot not found');
      // A snapshot does not change while its instance runs: no state check.
      return openLocked(manager, project, instance, async (handle) => {
        const stored = await snapshots.get(project, snapshotKey(instance, snap));
        if (!stored) throw notFound('Snapshot not found');
        const volume = { type: handle.record.type, project, name: instance };
        return {
          dir: await manager.deps.storage.snapshotPath(handle.record.pool, volume, snap),
          architecture: stored.doc.architecture || handle.record.architecture,
          type: handle.record.type,
          properties: imageProperties(stored.doc.config),
        };
      });
    },
  };

  images.registerSource(instanceSource);
  images.registerSource(snapshotSource);
}
