/**
 * Listener-wide HTTP settings from server keys: the CORS answer headers (`core.https_allowed_*`)
 * and the sources trusted to send a PROXY protocol header (`core.https_trusted_proxy`).
 */
import { isIP } from 'node:net';
import { isBool, truthy, type ConfigKeyRegistry } from '../../sdk/index.js';
import { plainAddress } from './proxy-protocol.js';

export class HttpSettings {
  private origin = '';
  private methods = '';
  private headers = '';
  private credentials = false;
  /** Undefined when no header is configured, so answers skip the work. */
  cors: Readonly<Record<string, string>> | undefined;
  trustedProxies: ReadonlySet<string> = new Set();

  /** `core.https_allowed_origin`: the one other site whose pages may call (`*`: any). */
  get allowedOrigin(): string {
    return this.origin;
  }

  set(key: 'origin' | 'methods' | 'headers', value: string): void {
    this[key] = value;
    this.rebuild();
  }

  setCredentials(value: boolean): void {
    this.credentials = value;
    this.rebuild();
  }

  private rebuild(): void {
    const out: Record<string, string> = {};
    if (this.origin) out['Access-Control-Allow-Origin'] = this.origin;
    if (this.methods) out['Access-Control-Allow-Methods'] = this.methods;
    if (this.headers) out['Access-Control-Allow-Headers'] = this.headers;
    if (this.credentials) out['Access-Control-Allow-Credentials'] = 'true';
    this.cors = Object.keys(out).length ? Object.freeze(out) : undefined;
  }
}

function parseAddressList(value: string): string[] {
  return value.split(',').map((a) => a.trim()).filter(Boolean);
}

export function registerHttpKeys(keys: ConfigKeyRegistry, http: HttpSettings): void {
  for (const [suffix, doc] of [
    ['origin', 'Access-Control-Allow-Origin header sent with every answer; also the one other site whose pages may call the HTTPS listener (`*`: any)'],
    ['methods', 'Access-Control-Allow-Methods header sent with every answer'],
    ['headers', 'Access-Control-Allow-Headers header sent with every answer'],
  ] as const) {
    keys.register({ key: `core.https_allowed_${suffix}`, scope: 'server', type: 'string', live: true, doc, apply: (value) => http.set(suffix, value) });
  }
  keys.register({
    key: 'core.https_allowed_credentials',
    scope: 'server',
    type: 'bool',
    live: true,
    default: 'false',
    validate: isBool,
    extension: 'https_allowed_credentials',
    doc: 'Send Access-Control-Allow-Credentials: true with every answer',
    apply: (value) => http.setCredentials(truthy(value)),
  });
  keys.register({
    key: 'core.https_trusted_proxy',
    scope: 'server',
    type: 'list',
    live: true,
    extension: 'server_trusted_proxy',
    doc: 'Comma-separated addresses of proxies whose connections start with a PROXY protocol header naming the real client',
    validate: (value) => {
      for (const address of parseAddressList(value)) if (!isIP(address)) throw new Error(`Invalid proxy address "${address}" (an IP address is expected)`);
    },
    apply: (value) => {
      http.trustedProxies = new Set(parseAddressList(value).map(plainAddress));
    },
  });
}
