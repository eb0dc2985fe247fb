/** Backups of instances and custom volumes: names and expiry, compression, the tarball, optimized (driver) parts, upload and import, the index.yaml, and the files kept for them. */
export * from './compression.js';
export * from './names.js';
export * from './tarball.js';
export * from './optimized.js';
export * from './store.js';
export * from './import.js';
export * from './index-yaml.js';
