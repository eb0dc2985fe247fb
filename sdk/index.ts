/** The only module plugins import. */
export const SDK_VERSION = '1.0.0';

export * from './errors.js';
export * from './responses.js';
export * from './routes.js';
export * from './patch.js';
export * from './operations.js';
export * from './events.js';
export * from './config-keys.js';
export * from './validate.js';
export * from './body.js';
export * from './json-request.js';
export * from './keyed-lock.js';
export * from './tar-walk.js';
export * from './progress.js';
export * from './store.js';
export * from './host-tools.js';
export * from './services.js';
export * from './warnings.js';
export * from './hooks.js';
export * from './plugin.js';
export { EXTENSION_CATALOG, isCatalogName, catalogPosition } from './extensions/catalog.js';
export * from './used-by.js';
export * from './instance.js';
export * from './device.js';
export * from './storage.js';
export * from './images.js';
export * from './profiles.js';
