/** The server keys of the external identity service (`candid.*`) and the RBAC service (`rbac.*`). */
import type { ConfigKeyDescriptor } from '../../sdk/index.js';
import type { ExternalAuthState } from './services.js';
import { agentUsername, base64Key, domainList, positiveSeconds, serviceUrl } from './validators.js';

type KeySpec = [key: string, validate: (v: string) => void, doc: string, defaultValue?: string];

const CANDID: KeySpec[] = [
  ['candid.api.url', serviceUrl, 'URL of the external macaroon identity service'],
  ['candid.api.key', base64Key, 'Public key the identity service is expected to use (allows an http:// service URL)'],
  ['candid.domains', domainList, 'Comma-separated domains whose users the identity service may authenticate'],
  ['candid.expiry', positiveSeconds, 'Lifetime of issued macaroons, in seconds', '3600'],
];

const RBAC: KeySpec[] = [
  ['rbac.api.url', serviceUrl, 'URL of the external role-based access control service'],
  ['rbac.api.key', base64Key, 'Public key of the RBAC service'],
  ['rbac.api.expiry', positiveSeconds, 'Lifetime of RBAC macaroons, in seconds', '3600'],
  ['rbac.expiry', positiveSeconds, 'Lifetime of RBAC macaroons, in seconds (the name 5.0 clients use)', '3600'],
  ['rbac.agent.url', serviceUrl, 'URL of the agent the daemon authenticates to the RBAC service as'],
  ['rbac.agent.username', agentUsername, 'Agent user name for the RBAC service'],
  ['rbac.agent.private_key', base64Key, 'Agent private key for the RBAC service'],
  ['rbac.agent.public_key', base64Key, 'Agent public key for the RBAC service'],
];

export function externalAuthKeys(state: ExternalAuthState): ConfigKeyDescriptor[] {
  const describe = ([key, validate, doc, defaultValue]: KeySpec, extension: string): ConfigKeyDescriptor => ({
    key,
    scope: 'server',
    type: key.endsWith('expiry') ? 'integer' : key === 'candid.domains' ? 'list' : 'string',
    default: defaultValue ?? '',
    live: true,
    validate,
    extension,
    doc: `${doc} (accepted and checked; the service is not connected)`,
    apply: (value) => state.apply(key, value),
  });
  return [...CANDID.map((k) => describe(k, 'external_authentication')), ...RBAC.map((k) => describe(k, 'rbac'))];
}
