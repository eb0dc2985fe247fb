/** Self-describing configuration keys: one registry, used by every plugin. */

export type KeyScope =
  | 'server' | 'project' | 'profile' | 'instance' | 'pool' | 'volume' | 'network' | `device:${string}`;

export type KeyType = 'string' | 'bool' | 'integer' | 'duration' | 'address' | 'list';

export interface ConfigKeyDescriptor {
  /** Exactly one of key, prefix or pattern. */
  key?: string;
  prefix?: string;
  pattern?: RegExp;
  scope: KeyScope;
  type: KeyType;
  /** Default value as the API shows it ("" when none). */
  default?: string;
  /** Applied without a restart. */
  live?: boolean;
  /** Throws an Error whose message says what is wrong with the value ("" is always allowed: it unsets). */
  validate?: (value: string) => void;
  /** The api_extensions name that introduced the key. */
  extension?: string;
  doc: string;
  /**
   * Write-only (passwords): GET /1.0 shows `true` when set, and `true` sent back means "keep the
   * stored value", as the reference does.
   */
  secret?: boolean;
  /** Server scope: turn the value a client sent into the form stored and applied (a password's salted hash). */
  encode?: (value: string) => string | Promise<string>;
  /** Server scope: put a new value into effect. Throwing refuses the change and restores the old value. */
  apply?: (value: string, previous: string) => void | Promise<void>;
  /**
   * Server scope: each cluster member keeps its own value (a listen address, a volume on its own pool),
   * as the reference's member-local keys; the others are shared by the whole cluster.
   */
  member?: boolean;
}

export interface ConfigKeyRegistry {
  register(descriptor: ConfigKeyDescriptor): void;
  /** Exact key first, then the longest prefix, then patterns. `user.*` is known everywhere. */
  lookup(scope: KeyScope, key: string): ConfigKeyDescriptor | undefined;
  /** Throws a 400 ApiError naming the first unknown key or invalid value. */
  validate(scope: KeyScope, config: Record<string, string>): void;
  list(scope?: KeyScope): ConfigKeyDescriptor[];
}

/** The server's own configuration (the `config` of `GET /1.0`). */
export interface ServerConfig {
  get(key: string): string;
  all(): Readonly<Record<string, string>>;
  /** Called after a change has been applied and stored. */
  onChange(listener: (changed: Record<string, string>) => void): void;
}
