/** One registry of self-describing config keys: exact key, then longest prefix, then pattern. */
import { badRequest, type ConfigKeyDescriptor, type ConfigKeyRegistry, type KeyScope } from '../../sdk/index.js';

/** `user.*` keys are free-form everywhere. */
const USER_KEY: Omit<ConfigKeyDescriptor, 'scope'> = { prefix: 'user.', type: 'string', doc: 'Free-form user key' };

interface ScopeKeys {
  exact: Map<string, ConfigKeyDescriptor>;
  prefixes: ConfigKeyDescriptor[];
  patterns: ConfigKeyDescriptor[];
}

export class KeyRegistry implements ConfigKeyRegistry {
  private readonly scopes = new Map<KeyScope, ScopeKeys>();
  private readonly all: ConfigKeyDescriptor[] = [];

  register(descriptor: ConfigKeyDescriptor): void {
    const forms = [descriptor.key, descriptor.prefix, descriptor.pattern].filter((f) => f !== undefined);
    if (forms.length !== 1) throw new Error(`config key descriptor needs exactly one of key, prefix or pattern (got ${forms.length}): ${descriptor.doc}`);
    const keys = this.scope(descriptor.scope);
    if (descriptor.key !== undefined) {
      if (keys.exact.has(descriptor.key)) throw new Error(`config key "${descriptor.key}" (${descriptor.scope}) is registered twice`);
      keys.exact.set(descriptor.key, descriptor);
    } else if (descriptor.prefix !== undefined) {
      if (keys.prefixes.some((d) => d.prefix === descriptor.prefix)) throw new Error(`config key prefix "${descriptor.prefix}" (${descriptor.scope}) is registered twice`);
      keys.prefixes.push(descriptor);
      keys.prefixes.sort((a, b) => b.prefix!.length - a.prefix!.length);
    } else {
      keys.patterns.push(descriptor);
    }
    this.all.push(descriptor);
  }

  lookup(scope: KeyScope, key: string): ConfigKeyDescriptor | undefined {
    const keys = this.scopes.get(scope);
    const found =
      keys?.exact.get(key) ??
      keys?.prefixes.find((d) => key.startsWith(d.prefix!) && key.length > d.prefix!.length) ??
      keys?.patterns.find((d) => d.pattern!.test(key));
    if (found) return found;
    if (key.startsWith('user.') && key.length > 5) return { ...USER_KEY, scope };
    return undefined;
  }

  validate(scope: KeyScope, config: Record<string, string>): void {
    for (const [key, value] of Object.entries(config)) {
      const descriptor = this.lookup(scope, key);
      if (!descriptor) throw badRequest(`Unknown configuration key: ${key}`);
      if (value === '' || !descriptor.validate) continue;
      try {
        descriptor.validate(value);
      } catch (err) {
        throw badRequest(`Invalid value for configuration key "${key}": ${(err as Error).message}`);
      }
    }
  }

  list(scope?: KeyScope): ConfigKeyDescriptor[] {
    return scope ? this.all.filter((d) => d.scope === scope) : [...this.all];
  }

  private scope(scope: KeyScope): ScopeKeys {
    let keys = this.scopes.get(scope);
    if (!keys) {
      keys = { exact: new Map(), prefixes: [], patterns: [] };
      this.scopes.set(scope, keys);
    }
    return keys;
  }
}
