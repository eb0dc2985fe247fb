/**
 * Profiles: /1.0/profiles, the `default` profile, and ProfilesServiceRef for the instances family
 * (loading profiles, vetting edits, used_by).
 */
import { definePlugin, featureScopedRoute, ProfilesServiceRef, StorageServiceRef, type PluginContext } from '../../sdk/index.js';
import { ProfileManager, PROFILES } from './manager.js';
import { DEFAULT_PROFILE, profileUrl, type Profile } from './profile.js';
import { profileRoutes } from './routes.js';

/** Per kernel: several test kernels may load this module in one process. */
const managers = new WeakMap<PluginContext, ProfileManager>();

export default definePlugin({
  register(ctx) {
    const profiles = new ProfileManager(ctx);
    managers.set(ctx, profiles);
    ctx.services.provide(ProfilesServiceRef, profiles);
    // A project without its own profiles (features.profiles=false) sees those of `default`.
    for (const route of profileRoutes(profiles)) ctx.routes.add(featureScopedRoute(ctx.services, 'profiles', route));
  },

  async boot(ctx) {
    const profiles = managers.get(ctx)!;
    await ctx.store.migrate([{
      version: 1,
      description: 'the default profile of the default project',
      up: async (store) => {
        await store.collection<Profile>(PROFILES).put('default', DEFAULT_PROFILE, {
          name: DEFAULT_PROFILE, description: 'Default LXD profile', config: {}, devices: {},
        }, 0);
      },
    }]);
    // Profiles do not need storage, so the link is made once every plugin has registered.
    ctx.services.get(StorageServiceRef)?.poolUsedBy.add(async (_project, pool) => (await profiles.records.list())
      .filter((s) => Object.values(s.doc.devices).some((d) => d.type === 'disk' && d.pool === pool))
      .map((s) => profileUrl(s.project, s.name)));
  },
});
