/** Typed service references: a plugin provides a service under a ref, others look it up. */

export interface ServiceRef<T> {
  readonly id: string;
  /** Phantom field carrying the service type. */
  readonly _type?: T;
}

export function createServiceRef<T>(id: string): ServiceRef<T> {
  return Object.freeze({ id });
}

export interface ServiceRegistry {
  provide<T>(ref: ServiceRef<T>, impl: T): void;
  get<T>(ref: ServiceRef<T>): T | undefined;
}

/** Families publish their own hook sets under a ref, like services; the kernel never knows their shape. */
export type HookSetRef<T> = ServiceRef<T>;
export const createHookSetRef = createServiceRef;
