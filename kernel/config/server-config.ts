/**
 * The server configuration: validated through the key registry, applied live key by key (a failed
 * apply rolls back the keys already applied), then stored.
 */
import { badRequest, type ServerConfig, type Store } from '../../sdk/index.js';
import type { KeyRegistry } from './key-registry.js';

interface ConfigDoc {
  config: Record<string, string>;
}

export class ServerConfigStore implements ServerConfig {
  private values: Readonly<Record<string, string>> = Object.freeze({});
  private readonly listeners: ((changed: Record<string, string>) => void)[] = [];

  /** Told when restoring a key's previous value failed too (the kernel raises a warning). */
  onRollbackFailure?: (key: string, err: Error) => void;

  constructor(private readonly store: Store, private readonly keys: KeyRegistry) {}

  async load(): Promise<void> {
    const stored = await this.store.collection<ConfigDoc>('server').get('', 'config');
    this.values = Object.freeze({ ...(stored?.doc.config ?? {}) });
  }

  get(key: string): string {
    return this.values[key] ?? this.keys.lookup('server', key)?.default ?? '';
  }

  all(): Readonly<Record<string, string>> {
    return this.values;
  }

  onChange(listener: (changed: Record<string, string>) => void): void {
    this.listeners.push(listener);
  }

  /** Put every stored key with an `apply` into effect (at boot). */
  async applyAll(): Promise<void> {
    for (const [key, value] of Object.entries(this.values)) await this.keys.lookup('server', key)?.apply?.(value, '');
  }

  /** What GET /1.0 shows: write-only keys as `true`, never their stored form. */
  visible(): Record<string, string | boolean> {
    const out: Record<string, string | boolean> = {};
    for (const [key, value] of Object.entries(this.values)) out[key] = this.keys.lookup('server', key)?.secret ? true : value;
    return out;
  }

  /** Set `changes` over the current values (write-only keys kept as stored); returns the keys that changed. */
  async update(changes: Record<string, string>): Promise<Record<string, string>> {
    const next: Record<string, string | true> = {};
    for (const key of Object.keys(this.values)) next[key] = this.keys.lookup('server', key)?.secret ? true : this.values[key]!;
    return this.replace({ ...next, ...changes });
  }

  /** Replace the whole configuration; keys left out are unset. Returns the keys that changed. */
  async replace(next: Record<string, string | true>): Promise<Record<string, string>> {
    const previous = this.values;
    const given: Record<string, string> = {};
    const kept: Record<string, string> = {};
    for (const [key, value] of Object.entries(next)) {
      const secret = this.keys.lookup('server', key)?.secret;
      // `true` for a write-only key is the masked value coming back: keep what is stored.
      if (value === true && !secret) throw badRequest(`Invalid value for "${key}": a string is expected`);
      if (value === true) {
        if (previous[key] !== undefined) kept[key] = previous[key]!;
      } else if (value !== '') given[key] = value;
    }
    this.keys.validate('server', given);
    const cleaned: Record<string, string> = { ...kept };
    for (const [key, value] of Object.entries(given)) {
      const encode = this.keys.lookup('server', key)?.encode;
      cleaned[key] = encode ? await encode(value) : value;
    }
    const changed: Record<string, string> = {};
    for (const key of new Set([...Object.keys(previous), ...Object.keys(cleaned)])) {
      if ((previous[key] ?? '') !== (cleaned[key] ?? '')) changed[key] = cleaned[key] ?? '';
    }
    if (Object.keys(changed).length === 0) return changed;

    const applied: string[] = [];
    try {
      for (const [key, value] of Object.entries(changed)) {
        // Counted before applying: a key that fails half-way must be restored too.
        applied.push(key);
        await this.keys.lookup('server', key)?.apply?.(value, previous[key] ?? '');
      }
      await this.store.collection<ConfigDoc>('server').put('', 'config', { config: cleaned });
    } catch (err) {
      for (const key of applied.reverse()) {
        await Promise.resolve(this.keys.lookup('server', key)?.apply?.(previous[key] ?? '', changed[key]!)).catch((rollbackErr: Error) =>
          this.onRollbackFailure?.(key, rollbackErr));
      }
      // The original stays with the refusal for the log; the envelope filters what the client reads.
      throw Object.assign(badRequest(`Failed to apply the new configuration: ${(err as Error).message}`), { cause: err });
    }
    this.values = Object.freeze(cleaned);
    for (const listener of this.listeners) listener(changed);
    return changed;
  }
}
