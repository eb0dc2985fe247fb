/** Snapshot names (patterns), expiry expressions and schedules, shared by instance and volume snapshots. */
export * from './pattern.js';
export * from './expiry.js';
export * from './schedule.js';
