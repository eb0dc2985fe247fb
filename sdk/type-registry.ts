/**
 * Extension points for named types that plugins add: storage drivers, network types, device
 * types, NIC types. The family that offers a point keeps a TypeRegistry; plugins fill it in their
 * register phase; the family seals it when it boots. Whether a name that nobody registered
 * "exists but is not enabled in this build" is read from the plugin manifests (the catalog), so
 * a family keeps no list of names.
 */

/** What the kernel read from plugin-registry.json, enabled plugins or not, without running plugin code. */
export interface PluginCatalog {
  /**
   * Whether some manifest names `name` under extension point `point`: a plugin registering it
   * (`provides.registers`), or the plugin offering the point as a name the API defines
   * (`provides.extensionPoints`).
   */
  declares(point: string, name: string): boolean;
}

/** `enabled`: registered in this build; `not-enabled`: declared by a manifest only; `unknown`: neither. */
export type TypeAvailability = 'enabled' | 'not-enabled' | 'unknown';

export class TypeRegistry<T> {
  private readonly entries = new Map<string, T>();
  private sealed = false;

  /**
   * `point` is the manifests' name of the extension point (`storage-driver`); `label` names one
   * entry in messages (`storage driver`).
   */
  constructor(readonly point: string, private readonly label: string, private readonly catalog: PluginCatalog) {}

  register(name: string, entry: T): void {
    // A late registration would change answers a client already had (supported drivers, refusals).
    if (this.sealed) throw new Error(`${this.label} "${name}" must be registered during the register phase`);
    if (this.entries.has(name)) throw new Error(`${this.label} "${name}" is registered twice`);
    this.entries.set(name, entry);
  }

  /** No registration after this (the offering family calls it from its boot phase). */
  seal(): void {
    this.sealed = true;
  }

  get(name: string): T | undefined {
    return this.entries.get(name);
  }

  values(): T[] {
    return [...this.entries.values()];
  }

  availability(name: string): TypeAvailability {
    if (this.entries.has(name)) return 'enabled';
    return this.catalog.declares(this.point, name) ? 'not-enabled' : 'unknown';
  }
}
