/** Names shared by the instance and device contracts. */
export type InstanceType = 'container' | 'virtual-machine';

/** Status pairs an instance reports (part 3 of the spec). */
export const InstanceStatusCodes = {
  Running: 103,
  Stopped: 102,
  Frozen: 110,
  Error: 112,
} as const;
export type InstanceStatus = keyof typeof InstanceStatusCodes;
