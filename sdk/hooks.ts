/**
 * Kernel hooks (tapable underneath). The kernel creates them once and freezes them; plugins get
 * tap-only facades that stamp their id on each tap. Order is set by named stages, never by
 * registration order.
 */
import type { ApiRequest } from './routes.js';
import type { ClusterJoinInfo, MemberConfigEntry } from './cluster.js';

/** Hook classes for families that publish their own hook sets (see `createHookSetRef`). */
export { SyncHook, SyncBailHook, SyncWaterfallHook, AsyncSeriesHook, AsyncSeriesBailHook, AsyncSeriesWaterfallHook, AsyncParallelHook, HookMap } from 'tapable';

export const Stage = Object.freeze({
  FIRST: -1000,
  EARLY: -100,
  NORMAL: 0,
  LATE: 100,
  LAST: 1000,
});

export interface TapOptions {
  stage?: number;
}

export interface Tappable<Args extends unknown[], R> {
  tap(fn: (...args: Args) => R, opts?: TapOptions): void;
}

/** What the TLS listener knows about a client before the certificates family decides. */
export interface TlsClient {
  /** SHA-256 fingerprint (lowercase hex) of the client certificate, if one was presented. */
  fingerprint?: string;
  /** PEM of the client certificate. */
  certificate?: string;
  address: string;
  /** The route's access policy. */
  access: string;
  path: string;
}

export interface AuthDecision {
  trusted: boolean;
  username?: string;
  /** For restricted clients: the projects they may see. */
  projects?: string[];
  /** A metrics-only certificate: not trusted, but admitted to routes with the `metrics` policy. */
  metrics?: boolean;
}

export interface ShutdownInfo {
  /**
   * The host is going down (SIGPWR): stop what the daemon runs. Otherwise (SIGTERM, SIGINT) the
   * daemon alone exits and workloads keep running, to be adopted by the next daemon.
   */
  hostShutdown: boolean;
}

export interface KernelHooks {
  /** Add fields to the `environment` section of GET /1.0 (drivers, storage...). Re-run when `refreshServerInfo()` is called. */
  environment: Tappable<[Record<string, unknown>], Record<string, unknown>>;
  /**
   * Add to GET /1.0's `auth_methods` (which starts as `tls`) the ways of logging in a plugin offers.
   * Re-run when the server config changes or `refreshServerInfo()` is called.
   */
  authMethods: Tappable<[string[]], string[]>;
  /** Decide trust for a TLS client; the first tap returning a decision wins. */
  authenticate: Tappable<[TlsClient], Promise<AuthDecision | undefined>>;
  /** Check the `project` of a request; throw an ApiError (404) for an unknown project. */
  checkProject: Tappable<[ApiRequest], Promise<void>>;
  /** Runs once every plugin has booted, before the API gate opens. */
  ready: Tappable<[], Promise<void>>;
  /**
   * Runs once, as the API opens (after `ready`, once the unix socket listens): where work that goes on
   * in the background starts without holding the opening (walks over every instance, autostart). Taps
   * only start their work; they must not throw.
   */
  serving: Tappable<[], void>;
  /** Runs on clean shutdown, before listeners close; later stages run later. */
  shutdown: Tappable<[ShutdownInfo], Promise<void>>;
  /** In a cluster: add the member-specific keys a joining server must give (GET /1.0/cluster `member_config`). */
  memberConfigKeys: Tappable<[MemberConfigEntry[]], Promise<MemberConfigEntry[]>>;
  /**
   * This server just became a cluster member, its store now on etcd: families split their records into
   * cluster-wide and member parts (first member) or create their member-local parts (joiner). A throw
   * reverts the enable or the join.
   */
  clusterJoined: Tappable<[ClusterJoinInfo], Promise<void>>;
}

/** How a follower names its tap on a family's hook, and where it runs among the others (`Stage`). */
export interface NamedTap {
  name: string;
  stage?: number;
}

/** A family's synchronous hook as its followers see it: they tap, the family calls. */
export interface FamilySyncHook<Args extends unknown[]> {
  tap(options: string | NamedTap, fn: (...args: Args) => void): void;
}

/** A family's asynchronous hook (taps run in series, each awaited) as its followers see it. */
export interface FamilyAsyncHook<Args extends unknown[]> {
  tapPromise(options: string | NamedTap, fn: (...args: Args) => Promise<void>): void;
}
