/** Helpers for network drivers and NIC devices: nftables tables and parent (uplink) interfaces. */
export * from './nftables.js';
export * from './parent.js';
