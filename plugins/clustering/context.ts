/** What the clustering plugin's parts share: the kernel's facilities and the plugin's own stores. */
import type Logger from 'bunyan';
import {
  ApiError,
  ClusterControlRef,
  type ClusterControl,
  type ClusterView,
  type EventsService,
  type OperationsService,
  type PluginContext,
  type ServerConfig,
  type ServiceRegistry,
  type Store,
} from '../../sdk/index.js';
import type { GroupStore } from './groups.js';
import type { JoinTokens } from './join-token.js';
import type { Membership } from './membership.js';

export interface Clustering {
  log: Logger;
  cluster: ClusterView;
  config: ServerConfig;
  store: Store;
  operations: OperationsService;
  events: EventsService;
  services: ServiceRegistry;
  membership: Membership;
  tokens: JoinTokens;
  groups: GroupStore;
  /** This member's own cluster address, once known (its record's). */
  ownAddress: string | undefined;
}

export function clusteringOf(ctx: PluginContext, membership: Membership, tokens: JoinTokens, groups: GroupStore): Clustering {
  return {
    log: ctx.log,
    cluster: ctx.cluster,
    config: ctx.serverConfig,
    store: ctx.store,
    operations: ctx.operations,
    events: ctx.events,
    services: ctx.services,
    membership,
    tokens,
    groups,
    ownAddress: undefined,
  };
}

/** The kernel's clustering facility; a build without it can still answer GET but not change anything. */
export function requireControl(c: Pick<Clustering, 'services'>): ClusterControl {
  const control = c.services.get(ClusterControlRef);
  if (!control) throw new ApiError(400, 'Clustering is not available in this build (the kernel offers no cluster control)');
  return control;
}

export function requireClustered(c: Pick<Clustering, 'cluster'>): void {
  if (!c.cluster.enabled) throw new ApiError(400, 'Server is not clustered');
}

/** The serving certificate, which is the cluster certificate once clustered. */
export function currentCertificate(control: ClusterControl): { cert: string; key: string } {
  const pair = control.certificate();
  if (!pair) throw new ApiError(503, 'The server certificate is not available');
  return pair;
}

