/**
 * external-auth: the keys of an external identity service (`candid.*`) and of an RBAC service
 * (`rbac.*`), accepted and checked, and the two services as IdentityProviders behind the kernel's
 * authenticate hook. Neither service is reachable from here, so neither connects, and the
 * `candid_authentication` and `rbac` extension names are not claimed.
 */
import { definePlugin, IdentityProvidersRef, Stage, type IdentityProvider, type PluginContext } from '../../sdk/index.js';
import { externalAuthKeys } from './keys.js';
import { ExternalAuthState, ExternalService } from './services.js';

/** Per kernel: a test process may run several. */
const states = new WeakMap<PluginContext, ExternalAuthState>();

export default definePlugin({
  register(ctx) {
    const state = new ExternalAuthState();
    states.set(ctx, state);
    for (const key of externalAuthKeys(state)) ctx.keys.register(key);
    const providers: readonly IdentityProvider[] = Object.freeze([new ExternalService('candid', state), new ExternalService('rbac', state)]);
    ctx.services.provide(IdentityProvidersRef, { list: () => providers });
    // With an identity service set, GET /1.0 offers it as a way to log in, as the reference does (it
    // does so from the URL alone, before any exchange with the service).
    const candid = providers[0]!;
    ctx.hooks.authMethods.tap((methods) => (candid.configured() ? [...methods, 'candid'] : methods));

    // After the trust store: a connected service may vouch for a client the store does not know.
    ctx.hooks.authenticate.tap(async (client) => {
      for (const provider of providers) {
        if (!provider.configured()) continue;
        if (!provider.connected()) {
          ctx.log.debug({ provider: provider.name, address: client.address }, 'identity service configured but not connected');
          continue;
        }
        const decision = await provider.authenticate(client);
        if (decision) return decision;
      }
      return undefined;
    }, { stage: Stage.LATE });
  },

  // The stored config is loaded after register and applied key by key after boot: seed the rules
  // with all of it first, so that the order of stored keys cannot matter.
  async boot(ctx) {
    states.get(ctx)!.seed(ctx.serverConfig.all());
  },
});
