/** Helpers for storage drivers: the directory layout of a pool and the bytes a tree uses. */
export * from './layout.js';
export * from './tree-usage.js';
export * from './unshift.js';
