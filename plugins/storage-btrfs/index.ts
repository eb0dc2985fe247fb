/** The btrfs storage driver plugin: registers BtrfsDriver with the storage family. */
import { definePlugin, runRemembered, StorageExtensionPointRef, StorageServiceRef } from '../../sdk/index.js';
import { BtrfsDriver } from './driver.js';

export default definePlugin({
  register(ctx) {
    const storage = ctx.extensionPoints.get(StorageExtensionPointRef);
    if (!storage) throw new Error('the storage-btrfs plugin needs the "storage" extension point');
    const driver = new BtrfsDriver(ctx.hostTools, ctx.dataDir);
    storage.registerDriver(driver);
  },

  async boot(ctx) {
    // `btrfs version` says "btrfs-progs v6.2": the reference shows the bare version.
    const storage = ctx.services.get(StorageServiceRef)!;
    const driver = storage.driver('btrfs') as BtrfsDriver | undefined;
    const res = await runRemembered(ctx.hostTools, 'btrfs', ['version'], { allowFailure: true });
    const match = /v?(\d+(\.\d+)+)/.exec(res.stdout);
    if (driver && match) driver.version = match[1]!;
  },
});
