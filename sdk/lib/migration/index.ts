/** The instance migration protocol shared by the ends that send and receive instances and volumes. */
export * from './messages.js';
export * from './channel.js';
export * from './names.js';
export * from './rsync.js';
export * from './protocol.js';
