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

/**
 * Registration a plugin offers to the plugins that depend on it (Backstage's extension points):
 * drivers, device types. Offered and used in `register()` only; the kernel closes every extension
 * point once all plugins have registered, so what a family knows is settled before anything boots.
 * What a family offers at run time (listing, metrics) is a service under a ServiceRef instead.
 */
export interface ExtensionPointRef<T> {
  readonly id: string;
  /** Phantom field carrying the extension point's type. */
  readonly _type?: T;
}

export function createExtensionPoint<T>(id: string): ExtensionPointRef<T> {
  return Object.freeze({ id });
}

export interface ExtensionPointRegistry {
  /** Offer `impl` under `ref` (in `register()`). */
  provide<T extends object>(ref: ExtensionPointRef<T>, impl: T): void;
  /** The extension point when an enabled plugin offers it (in `register()`); undefined otherwise. */
  get<T>(ref: ExtensionPointRef<T>): T | undefined;
}
