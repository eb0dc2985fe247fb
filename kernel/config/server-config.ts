/**
 * The server configuration: validated through the key registry, applied live key by key (a failed
 * apply rolls back the keys already applied), then stored. Shared keys live in the store (in a
 * cluster, every member's); member keys (`member: true`: listen addresses, volumes on its own pools)
 * live in a file of this server's data dir, which enabling or joining a cluster leaves alone. A change
 * another member writes to the shared keys reaches this one through the store's change feed and is
 * applied here too.
 */
import { readFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, type ServerConfig, type Store } from '../../sdk/index.js';
import type { KeyRegistry } from './key-registry.js';

interface ConfigDoc {
  config: Record<string, string>;
}

const MEMBER_FILE = 'server-member.json';

export class ServerConfigStore implements ServerConfig {
  private values: Readonly<Record<string, string>> = Object.freeze({});
  private readonly listeners: ((changed: Record<string, string>) => void)[] = [];

  /** Told when restoring a key's previous value failed too (the kernel raises a warning). */
  onRollbackFailure?: (key: string, err: Error) => void;

  /** `dataDir` undefined (tests): member keys are kept with the others. */
  constructor(private readonly store: Store, private readonly keys: KeyRegistry, private readonly dataDir?: string) {}

  private get memberFile(): string | undefined {
    return this.dataDir && path.join(this.dataDir, MEMBER_FILE);
  }

  private isMemberKey(key: string): boolean {
    return this.memberFile !== undefined && this.keys.lookup('server', key)?.member === true;
  }

  async load(): Promise<void> {
    const stored = await this.store.collection<ConfigDoc>('server').get('', 'config');
    const shared = { ...(stored?.doc.config ?? {}) };
    const own = this.readMemberFile();
    // Member keys a former version kept with the shared ones move to the file once.
    const strays = Object.keys(shared).filter((key) => this.isMemberKey(key));
    if (strays.length && !this.memberFileExists) {
      for (const key of strays) own[key] = shared[key]!;
      await this.writeMemberFile(own);
    }
    for (const key of strays) delete shared[key];
    this.values = Object.freeze({ ...shared, ...own });
    this.store.onChange((change) => {
      if (change.collection === 'server' && change.name === 'config') void this.follow();
    });
  }

  private memberFileExists = false;

  private readMemberFile(): Record<string, string> {
    if (!this.memberFile) return {};
    try {
      const parsed = JSON.parse(readFileSync(this.memberFile, 'utf8')) as ConfigDoc;
      this.memberFileExists = true;
      return { ...parsed.config };
    } catch {
      return {};
    }
  }

  private async writeMemberFile(config: Record<string, string>): Promise<void> {
    if (!this.memberFile) return;
    const staged = `${this.memberFile}.new`;
    await writeFile(staged, JSON.stringify({ config }), { mode: 0o600 });
    await rename(staged, this.memberFile);
    this.memberFileExists = true;
  }

  /** Split a full configuration into what the store keeps and what this member's file keeps. */
  private split(config: Record<string, string>): { shared: Record<string, string>; own: Record<string, string> } {
    const shared: Record<string, string> = {};
    const own: Record<string, string> = {};
    for (const [key, value] of Object.entries(config)) (this.isMemberKey(key) ? own : shared)[key] = value;
    return { shared, own };
  }

  /** Another member (or this one) wrote the shared keys: apply what differs from what is in effect here. */
  private following: Promise<void> = Promise.resolve();
  private follow(): Promise<void> {
    this.following = this.following.then(async () => {
      const stored = await this.store.collection<ConfigDoc>('server').get('', 'config');
      const shared = this.split(stored?.doc.config ?? {}).shared;
      const current = this.values;
      const next: Record<string, string> = { ...shared };
      for (const [key, value] of Object.entries(current)) if (this.isMemberKey(key)) next[key] = value;
      const changed: Record<string, string> = {};
      for (const key of new Set([...Object.keys(current), ...Object.keys(next)])) {
        if ((current[key] ?? '') !== (next[key] ?? '')) changed[key] = next[key] ?? '';
      }
      if (!Object.keys(changed).length) return;
      this.values = Object.freeze(next);
      for (const [key, value] of Object.entries(changed)) {
        await Promise.resolve(this.keys.lookup('server', key)?.apply?.(value, current[key] ?? '')).catch((err: Error) => this.onRollbackFailure?.(key, err));
      }
      for (const listener of this.listeners) listener(changed);
    }).catch(() => undefined);
    return this.following;
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
      const { shared, own } = this.split(cleaned);
      // In effect before the write: the change feed then finds nothing new to apply for it.
      this.values = Object.freeze(cleaned);
      if (Object.keys(changed).some((key) => this.isMemberKey(key))) await this.writeMemberFile(own);
      if (Object.keys(changed).some((key) => !this.isMemberKey(key))) await this.store.collection<ConfigDoc>('server').put('', 'config', { config: shared });
    } catch (err) {
      this.values = previous;
      if (Object.keys(changed).some((key) => this.isMemberKey(key))) await this.writeMemberFile(this.split(previous).own).catch(() => undefined);
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
