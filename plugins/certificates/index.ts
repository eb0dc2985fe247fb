/**
 * Certificates: the trust store (/1.0/certificates), trust passwords and add tokens, and the
 * `authenticate` tap deciding who a TLS client is (trusted, restricted to projects, metrics-only,
 * or nobody), with PKI mode when `server.ca` is in the data dir.
 */
import { definePlugin, isBool, truthy, type PluginContext } from '../../sdk/index.js';
import { hashPassword } from './password.js';
import { loadPki, type Pki } from './pki.js';
import { certificateRoutes } from './routes.js';
import { CertificateTokens } from './tokens.js';
import { TrustStore } from './trust.js';

interface State {
  trust: TrustStore;
  pki: Pki | undefined;
}

/** Per kernel: several test kernels may load this module in one process. */
const states = new WeakMap<PluginContext, State>();

export default definePlugin({
  register(ctx) {
    const state: State = { pki: undefined, trust: undefined! };
    state.trust = new TrustStore(ctx.store, () => state.pki, () => truthy(ctx.serverConfig.get('core.trust_ca_certificates')));
    states.set(ctx, state);

    ctx.keys.register({
      key: 'core.trust_password',
      scope: 'server',
      type: 'string',
      live: true,
      secret: true,
      encode: hashPassword,
      doc: 'Password untrusted clients give to add their certificate (kept as a salted scrypt hash; unset: password trust is off)',
    });
    ctx.keys.register({
      key: 'core.trust_ca_certificates',
      scope: 'server',
      type: 'bool',
      live: true,
      default: 'false',
      validate: isBool,
      extension: 'trust_ca_certificates',
      doc: 'In PKI mode, trust every client certificate the CA issued (unless revoked in ca.crl) without adding it',
      apply: () => state.trust.invalidate(),
    });

    const tokens = new CertificateTokens(ctx.operations, ctx.dataDir, () => ctx.serverConfig.get('core.https_address'));
    for (const route of certificateRoutes(state.trust, tokens, ctx.serverConfig, ctx.events)) ctx.routes.add(route);
    ctx.hooks.authenticate.tap(async (client) => state.trust.decide(client));
  },

  async boot(ctx) {
    const state = states.get(ctx)!;
    state.pki = await loadPki(ctx.dataDir);
    if (state.pki) ctx.log.info({ revoked: state.pki.revoked.size }, 'PKI mode: client certificates must be issued by server.ca');
    await state.trust.load();
  },
});
