/**
 * Whether a container may run on a rootfs that shares its image's files under a layer of its own
 * (decision 0075): only without an id map (overlayfs cannot be mounted id-mapped) and without
 * nesting (an overlay cannot be the upper layer of the overlays a nested runtime makes).
 */
import { truthy, type InstanceType } from '../../sdk/index.js';

export function mayShareImage(type: InstanceType, config: Record<string, string>): boolean {
  return type === 'container' && truthy(config['security.privileged']) && !truthy(config['security.nesting']);
}
