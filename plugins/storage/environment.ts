/** The storage fields of GET /1.0's `environment`. */
import type { DriverTable } from './drivers.js';
import type { PoolManager } from './pools.js';

export function storageEnvironment(drivers: DriverTable, pools: PoolManager) {
  return (env: Record<string, unknown>): Record<string, unknown> => {
    // Several drivers in use are listed together, as the reference does.
    const inUse = pools.driversInUse();
    return {
      ...env,
      storage: inUse.join(' | '),
      storage_version: inUse.map((name) => drivers.version(name) || '1').join(' | '),
      storage_supported_drivers: drivers.supported(),
    };
  };
}
