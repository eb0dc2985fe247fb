/** Moved to sdk/ (volume snapshots share it); kept so the instances family's imports stay short. */
export * from '../../../sdk/snapshot-expiry.js';
