/**
 * Extension points: registration that host plugins offer to the plugins depending on them. Open
 * while plugins register; closed for good afterwards, so a late registration (from boot, a
 * request or a timer) fails loudly instead of changing what the family knows behind its back.
 */
import type { ExtensionPointRef, ExtensionPointRegistry } from '../sdk/index.js';

export class ExtensionPointTable {
  private readonly points = new Map<string, { owner: string; facade: object }>();
  private closed = false;

  /** What one plugin sees: provides recorded under its id. */
  scoped(owner: string): ExtensionPointRegistry {
    return {
      provide: (ref, impl) => this.provide(owner, ref, impl),
      get: (ref) => this.get(owner, ref),
    };
  }

  /** Called once every plugin has registered. */
  close(): void {
    this.closed = true;
  }

  private provide<T extends object>(owner: string, ref: ExtensionPointRef<T>, impl: T): void {
    this.checkOpen(owner, ref.id);
    const existing = this.points.get(ref.id);
    if (existing) throw new Error(`extension point "${ref.id}" is provided by both ${existing.owner} and ${owner}`);
    this.points.set(ref.id, { owner, facade: this.guard(ref.id, impl) });
  }

  private get<T>(user: string, ref: ExtensionPointRef<T>): T | undefined {
    this.checkOpen(user, ref.id);
    return this.points.get(ref.id)?.facade as T | undefined;
  }

  private checkOpen(plugin: string, id: string): void {
    if (this.closed) throw new Error(`${plugin}: extension point "${id}" is only open while plugins register`);
  }

  /** The same methods, refused once the table is closed (a plugin may have kept the object). */
  private guard<T extends object>(id: string, impl: T): T {
    return new Proxy(impl, {
      get: (target, key, receiver) => {
        const value = Reflect.get(target, key, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          if (this.closed) throw new Error(`extension point "${id}" is only open while plugins register (${String(key)} called later)`);
          return Reflect.apply(value, target, args);
        };
      },
    });
  }
}
