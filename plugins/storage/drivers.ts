/**
 * The storage drivers this build has (the `storage-driver` extension point), and which pool keys
 * belong to which driver.
 */
import {
  badRequest, STORAGE_DRIVER_POINT, TypeRegistry,
  type ConfigKeyDescriptor, type ConfigKeyRegistry, type PluginCatalog, type StorageDriver,
} from '../../sdk/index.js';

/** Optional facts a driver may carry for `storage_supported_drivers`. */

export interface SupportedDriver {
  Name: string;
  Version: string;
  Remote: boolean;
}

export class DriverTable {
  private readonly drivers: TypeRegistry<StorageDriver>;
  /** Which driver registered a pool key: a key of one driver is refused on another driver's pool. */
  private readonly keyOwners = new Map<ConfigKeyDescriptor, string>();

  constructor(private readonly keys: ConfigKeyRegistry, catalog: PluginCatalog) {
    this.drivers = new TypeRegistry(STORAGE_DRIVER_POINT, 'storage driver', catalog);
  }

  register(driver: StorageDriver): void {
    this.drivers.register(driver.name, driver);
    for (const key of driver.configKeys ?? []) {
      const descriptor = { ...key, scope: 'pool' as const };
      this.keys.register(descriptor);
      this.keyOwners.set(descriptor, driver.name);
    }
  }

  get(name: string): StorageDriver | undefined {
    return this.drivers.get(name);
  }

  /** Driver plugins register in their register phase only. */
  seal(): void {
    this.drivers.seal();
  }

  /** The driver for a new pool: 400 when it is unknown or not enabled. */
  require(name: string): StorageDriver {
    const driver = this.drivers.get(name);
    if (driver) return driver;
    if (this.drivers.availability(name) === 'not-enabled') throw badRequest(`Storage driver "${name}" is not enabled in this build`);
    throw badRequest(`Storage driver "${name}" is not supported`);
  }

  /** Family keys, this driver's keys and `user.*`; 400 naming the first key that is none of these. */
  validate(driver: string, config: Record<string, string>): void {
    this.keys.validate('pool', config);
    for (const key of Object.keys(config)) {
      const owner = this.keyOwners.get(this.keys.lookup('pool', key)!);
      if (owner !== undefined && owner !== driver) throw badRequest(`Invalid option "${key}" for storage driver "${driver}"`);
    }
  }

  supported(): SupportedDriver[] {
    return this.drivers.values()
      .map((d) => ({ Name: d.name, Version: d.version ?? '1', Remote: d.remote ?? false }))
      .sort((a, b) => a.Name.localeCompare(b.Name));
  }

  version(name: string): string {
    return this.drivers.get(name)?.version ?? '';
  }
}
