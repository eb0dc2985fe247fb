/**
 * The contract (SDK_VERSION): everything a plugin implements or calls as API, and nothing
 * family-specific. Plugins import it, and the shared library beside it (sdk/lib/<area>/index.js),
 * never the kernel or one another; the kernel imports only this. The TypeScript project references
 * check these lines at build time (docs/decisions/0028-sdk-contract-and-library.md).
 *
 * Kernel seam: plugin, services, hooks, store, operations, events, config keys, host tools,
 * warnings, identity. Routes and their wire rules: route descriptors, responses, errors, body
 * shapes and field checks, JSON bodies, PATCH merging, value validators and sizes, the per-key
 * lock the kernel serialises writes with. Family contracts: instance, device, metrics, storage,
 * custom volumes, daemon storage, network, images, profiles, projects, used_by. The ordered
 * extension catalog.
 */
export const SDK_VERSION = '2.19.0';

export * from './errors.js';
export * from './responses.js';
export * from './routes.js';
export * from './patch.js';
export * from './operations.js';
export * from './secrets.js';
export * from './events.js';
export * from './config-keys.js';
export * from './validate.js';
export * from './size.js';
export * from './cpu-set.js';
export * from './body.js';
export * from './body-shape.js';
export * from './json-request.js';
export * from './keyed-lock.js';
export * from './store.js';
export * from './cluster.js';
export * from './cluster-groups.js';
export * from './instance-evacuation.js';
export * from './host-tools.js';
export * from './services.js';
export * from './warnings.js';
export * from './hooks.js';
export * from './plugin.js';
export * from './type-registry.js';
export { EXTENSION_CATALOG, SPEC_SPELLINGS, isCatalogName, catalogPosition, twinOf } from './extensions/catalog.js';
export * from './used-by.js';
export * from './instance.js';
export * from './instance-files.js';
export * from './instance-hooks.js';
export * from './metrics.js';
export * from './identity.js';
export * from './device.js';
export * from './nic-type.js';
export * from './storage.js';
export * from './storage-volumes.js';
export * from './daemon-storage.js';
export * from './network.js';
export * from './images.js';
export * from './profiles.js';
export * from './projects.js';
