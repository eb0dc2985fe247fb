/**
 * Clustering: the API over the cluster (`/1.0/cluster...`), membership, join tokens, roles and health.
 * The kernel runs etcd, the store on it and forwarding; this plugin drives it through ClusterControl and
 * publishes the membership back to it.
 */
import { ClusterControlRef, ClusterGroupsRef, definePlugin, type PluginContext, type StoreChange } from '../../sdk/index.js';
import { ClusterCertificate, CERTIFICATE_COLLECTION, type CertificateRecord } from './cluster-certificate.js';
import { clusteringOf, type Clustering } from './context.js';
import { askToDemote } from './demotion.js';
import { groupRoutes } from './group-routes.js';
import { GroupStore } from './groups.js';
import { JoinTokens, TOKENS_COLLECTION, type TokenRecord } from './join-token.js';
import { Keys, registerClusterKeys } from './keys.js';
import { followOwnName } from './member-edit.js';
import { Membership, MEMBERS_COLLECTION } from './membership.js';
import type { MemberRecord } from './member.js';
import { clusterRoutes } from './routes.js';

interface State {
  c: Clustering;
  certificate: ClusterCertificate;
}

/** Per kernel: several test kernels may load this module in one process. */
const states = new WeakMap<PluginContext, State>();

export default definePlugin({
  register(ctx) {
    const control = () => ctx.services.get(ClusterControlRef);
    const records = ctx.store.collection<MemberRecord>(MEMBERS_COLLECTION);
    const membership = new Membership(records, ctx.cluster, ctx.serverConfig, control, ctx.log);
    const tokenRecords = ctx.store.collection<TokenRecord>(TOKENS_COLLECTION);
    const tokens = new JoinTokens(tokenRecords, ctx.operations, () => ctx.cluster.serverName);
    const groups = new GroupStore(ctx.store);
    const c = clusteringOf(ctx, membership, tokens, groups);
    ctx.services.provide(ClusterGroupsRef, groups);
    membership.demote = async (member) => {
      const found = control();
      if (found) await askToDemote(found, member);
    };
    const certificate = new ClusterCertificate(ctx.store.collection<CertificateRecord>(CERTIFICATE_COLLECTION), control);
    states.set(ctx, { c, certificate });

    registerClusterKeys(ctx.keys, { clustered: () => ctx.cluster.enabled, currentAddress: () => c.ownAddress ?? '' });
    for (const route of [...clusterRoutes(c, certificate), ...groupRoutes(c)]) ctx.routes.add(route);

    ctx.hooks.environment.tap((env) => (ctx.cluster.enabled ? { ...env, server_clustered: true, server_name: ctx.cluster.serverName } : env));
    ctx.cluster.onChange(() => ctx.refreshServerInfo());

    // Other members' writes arrive through the store's change feed (an etcd watch once clustered).
    ctx.store.onChange((change: StoreChange) => {
      if (!ctx.cluster.enabled) return;
      if (change.collection === MEMBERS_COLLECTION) void onMembersChanged(c).catch((err: Error) => ctx.log.warn({ err }, 'could not follow a membership change'));
      else if (change.collection === TOKENS_COLLECTION) tokens.onStoreChange(change, async () => (await tokenRecords.get('', change.name).catch(() => undefined))?.doc);
      else if (change.collection === CERTIFICATE_COLLECTION) void certificate.follow().catch((err: Error) => ctx.log.error({ err }, 'could not apply the new cluster certificate'));
    });
    ctx.serverConfig.onChange((changed) => {
      // A new threshold takes effect as a new lease TTL.
      if (Keys.offlineThreshold in changed && ctx.cluster.enabled && membership.health.running) {
        void membership.start(ctx.cluster.serverName).catch((err: Error) => ctx.log.error({ err }, 'could not hold the lease with the new threshold'));
      }
    });
  },

  async boot(ctx) {
    const { c, certificate } = states.get(ctx)!;
    if (!ctx.cluster.enabled) return;
    const own = await c.membership.get(ctx.cluster.serverName);
    c.ownAddress = own?.doc.address;
    await certificate.follow().catch((err: Error) => ctx.log.error({ err }, 'could not apply the cluster certificate'));
    await c.membership.start(ctx.cluster.serverName);
  },

  async shutdown(ctx) {
    // Releasing the lease shows this member OFFLINE at once instead of after the TTL.
    await states.get(ctx)?.c.membership.stop();
  },
});

/** Publish the new membership; when this member's record was renamed elsewhere, take the new name. */
async function onMembersChanged(c: Clustering): Promise<void> {
  await c.membership.publish();
  if (!c.ownAddress) return;
  const mine = (await c.membership.list()).find((m) => m.address === c.ownAddress);
  const control = c.services.get(ClusterControlRef);
  if (mine && control && mine.name !== c.cluster.serverName) await followOwnName(c, control, mine.name);
}
