/** Archives: telling a file's format from its first bytes, and walking a tar stream member by member. */
export * from './file-format.js';
export * from './tar-walk.js';
