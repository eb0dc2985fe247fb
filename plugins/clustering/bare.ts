/**
 * A joining server must be bare, as the reference requires: its own data is discarded when it switches
 * to the cluster's store, so anything a user made on it (instances, custom volumes) refuses the join.
 */
import { ApiError, CustomVolumesServiceRef, InstancesServiceRef, type ServiceRegistry } from '../../sdk/index.js';

export async function checkBare(services: ServiceRegistry): Promise<void> {
  const instances = (await services.get(InstancesServiceRef)?.list().catch(() => [])) ?? [];
  if (instances.length > 0) {
    throw new ApiError(400, `The joining server must be bare: it has ${instances.length} instance(s) (${instances.slice(0, 3).map((i) => i.name).join(', ')}), which joining would discard`);
  }
  const volumes = services.get(CustomVolumesServiceRef)?.list('default') ?? [];
  if (volumes.length > 0) {
    throw new ApiError(400, `The joining server must be bare: it has ${volumes.length} custom storage volume(s), which joining would discard`);
  }
}
