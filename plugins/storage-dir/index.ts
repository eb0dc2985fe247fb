/** The dir storage driver plugin: registers DirDriver with the storage family. */
import { definePlugin, StorageExtensionPointRef } from '../../sdk/index.js';
import { DirDriver } from './driver.js';
import { SourceRegistry, type SourceRecord } from './source.js';

export default definePlugin({
  register(ctx) {
    const storage = ctx.extensionPoints.get(StorageExtensionPointRef);
    if (!storage) throw new Error('the storage-dir plugin needs the "storage" extension point');
    storage.registerDriver(new DirDriver(ctx.hostTools, new SourceRegistry(ctx.store.collection<SourceRecord>('sources'))));
  },
});
