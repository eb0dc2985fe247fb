/**
 * The network types this build has (the `network-type` extension point). Each type's keys are registered with the key registry (scope
 * `network`, for docs and lookups) and validated per type here, so one type's key is refused on
 * another type's network and two types may share a key name with their own checks.
 */
import {
  badRequest, NETWORK_TYPE_POINT, TypeRegistry,
  type ConfigKeyDescriptor, type ConfigKeyRegistry, type NetworkDriver, type PluginCatalog,
} from '../../sdk/index.js';

function matches(d: ConfigKeyDescriptor, key: string): boolean {
  if (d.key !== undefined) return d.key === key;
  if (d.prefix !== undefined) return key.startsWith(d.prefix);
  return d.pattern!.test(key);
}

export class NetworkDriverTable {
  private readonly drivers: TypeRegistry<NetworkDriver>;
  /** Keys other plugins add to a type (network policies: ACLs...). */
  private readonly extra = new Map<string, ConfigKeyDescriptor[]>();

  constructor(private readonly keys: ConfigKeyRegistry, catalog: PluginCatalog) {
    this.drivers = new TypeRegistry(NETWORK_TYPE_POINT, 'network type', catalog);
  }

  register(driver: NetworkDriver): void {
    this.drivers.register(driver.type, driver);
    this.registerKeys(driver.configKeys ?? []);
  }

  /** Keys a network policy adds to some types. */
  addKeys(types: string[], keys: ConfigKeyDescriptor[]): void {
    for (const type of types) this.extra.set(type, [...(this.extra.get(type) ?? []), ...keys]);
    this.registerKeys(keys);
  }

  private registerKeys(keys: ConfigKeyDescriptor[]): void {
    for (const key of keys) {
      const known = this.keys.list('network').some((d) => d.key === key.key && d.prefix === key.prefix && String(d.pattern) === String(key.pattern));
      if (!known) this.keys.register({ ...key, scope: 'network' });
    }
  }

  get(type: string): NetworkDriver | undefined {
    return this.drivers.get(type);
  }

  all(): NetworkDriver[] {
    return this.drivers.values();
  }

  /** Type plugins register in their register phase only. */
  seal(): void {
    this.drivers.seal();
  }

  /** The driver for a new network: 400 when the type is unknown or not enabled. */
  require(type: string): NetworkDriver {
    const driver = this.drivers.get(type);
    if (driver) return driver;
    if (this.drivers.availability(type) === 'not-enabled') throw badRequest(`Network type "${type}" is not enabled in this build`);
    throw badRequest(`Unknown network type "${type}"`);
  }

  /** This type's keys (exact key first, then the longest prefix, then patterns) and `user.*`; 400 on the first bad one. */
  validate(type: string, config: Record<string, string>): void {
    const own = [...(this.require(type).configKeys ?? []), ...(this.extra.get(type) ?? [])];
    for (const [key, value] of Object.entries(config)) {
      if (key.startsWith('user.')) continue;
      const descriptor = own.find((d) => d.key === key)
        ?? own.filter((d) => d.prefix !== undefined && key.startsWith(d.prefix)).sort((a, b) => b.prefix!.length - a.prefix!.length)[0]
        ?? own.find((d) => d.pattern !== undefined && matches(d, key));
      if (!descriptor) {
        if (this.keys.lookup('network', key)) throw badRequest(`Invalid option "${key}" for network type "${type}"`);
        throw badRequest(`Unknown configuration key: ${key}`);
      }
      if (value === '' || !descriptor.validate) continue;
      try {
        descriptor.validate(value);
      } catch (err) {
        throw badRequest(`Invalid value for network option "${key}": ${(err as Error).message}`);
      }
    }
  }
}
