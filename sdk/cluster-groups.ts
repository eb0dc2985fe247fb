/**
 * Cluster groups (`clustering_groups`) as the clustering plugin offers them to other plugins: placement
 * with `?target=@<group>` asks which members a group holds.
 */
import { createServiceRef } from './services.js';

export interface ClusterGroups {
  /** The members of `group`, in the cluster's member order; undefined when there is no such group. */
  membersOf(group: string): Promise<readonly string[] | undefined>;
}

export const ClusterGroupsRef = createServiceRef<ClusterGroups>('clustering.groups');
