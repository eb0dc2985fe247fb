/**
 * External identity and authorization services (a macaroon identity provider such as Candid, an
 * RBAC service): a provider plugin owns its `<name>.*` server keys and answers for TLS clients the
 * trust store does not know. The kernel's `authenticate` hook reaches them through the plugin that
 * taps it; other plugins may list them (e.g. to report what is configured).
 */
import { createServiceRef } from './services.js';
import type { AuthDecision, TlsClient } from './hooks.js';

export interface IdentityProvider {
  /** The key prefix it owns: `candid`, `rbac`. */
  readonly name: string;
  /** Its service address is set (`<name>.api.url`). */
  configured(): boolean;
  /** Its service was reached and answers; while false it decides nothing. */
  connected(): boolean;
  /** A decision for this client, or undefined to leave it to others (the trust store, then untrusted). */
  authenticate(client: TlsClient): Promise<AuthDecision | undefined>;
}

export interface IdentityProviders {
  list(): readonly IdentityProvider[];
}

export const IdentityProvidersRef = createServiceRef<IdentityProviders>('identity-providers');
