/**
 * The two external services as identity providers, and the rules that tie their keys together.
 * Neither service can be reached from here, so neither connects: their keys are kept and checked,
 * and authentication goes on without them. A later connector changes `connected` and
 * `authenticate` only.
 */
import type { AuthDecision, IdentityProvider } from '../../sdk/index.js';

/** Current values of the keys these services own, updated as the kernel applies each key (and rolls it back). */
export class ExternalAuthState {
  private readonly values = new Map<string, string>();

  get(key: string): string {
    return this.values.get(key) ?? '';
  }

  /** The stored values, taken as they are (they passed these rules when they were set). */
  seed(config: Readonly<Record<string, string>>): void {
    for (const [key, value] of Object.entries(config)) {
      if (key.startsWith('candid.') || key.startsWith('rbac.')) this.values.set(key, value);
    }
  }

  /** Put a key's new value in place, refusing a value that contradicts the others (the old value stays). */
  apply(key: string, value: string): void {
    const previous = this.get(key);
    this.values.set(key, value);
    try {
      // Unsetting always works: a client clearing the whole config must not trip over the order of keys.
      if (value !== '') this.check(key);
    } catch (err) {
      this.values.set(key, previous);
      throw err;
    }
  }

  private check(key: string): void {
    const candid = this.get('candid.api.url') !== '';
    const rbac = this.get('rbac.api.url') !== '';
    if ((key.startsWith('candid.') && rbac) || (key.startsWith('rbac.') && candid)) {
      throw new Error('The candid.* identity service and the rbac.* service cannot be used together');
    }
    if (key === 'candid.api.url' && new URL(this.get(key)).protocol === 'http:' && this.get('candid.api.key') === '') {
      throw new Error('An http:// identity service needs its public key in candid.api.key (set that first), or use https://');
    }
  }
}

export class ExternalService implements IdentityProvider {
  constructor(readonly name: 'candid' | 'rbac', private readonly state: ExternalAuthState) {}

  configured(): boolean {
    return this.state.get(`${this.name}.api.url`) !== '';
  }

  connected(): boolean {
    return false;
  }

  async authenticate(): Promise<AuthDecision | undefined> {
    return undefined;
  }
}
