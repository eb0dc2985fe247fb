/** The kernel's tapable hooks: created once, frozen, and handed to plugins as tap-only facades. */
import { AsyncSeriesBailHook, AsyncSeriesHook, AsyncSeriesWaterfallHook, SyncHook, SyncWaterfallHook } from 'tapable';
import type { ApiRequest, AuthDecision, ClusterJoinInfo, KernelHooks, MemberConfigEntry, ShutdownInfo, TlsClient } from '../sdk/index.js';

export class KernelHookSet {
  readonly environment = new SyncWaterfallHook<[Record<string, unknown>]>(['environment']);
  readonly authMethods = new SyncWaterfallHook<[string[]]>(['methods']);
  readonly authenticate = new AsyncSeriesBailHook<[TlsClient], AuthDecision | undefined>(['client']);
  readonly checkProject = new AsyncSeriesHook<[ApiRequest]>(['request']);
  readonly ready = new AsyncSeriesHook<[]>([]);
  readonly serving = new SyncHook<[]>([]);
  readonly shutdown = new AsyncSeriesHook<[ShutdownInfo]>(['info']);
  readonly memberConfigKeys = new AsyncSeriesWaterfallHook<[MemberConfigEntry[]]>(['entries']);
  readonly clusterJoined = new AsyncSeriesHook<[ClusterJoinInfo]>(['info']);

  constructor() {
    Object.freeze(this);
  }

  /** What a plugin sees: tap only, with its id stamped on every tap. */
  facade(pluginId: string): KernelHooks {
    const tapOptions = (stage?: number) => ({ name: pluginId, stage: stage ?? 0 });
    return Object.freeze({
      environment: { tap: (fn, o) => this.environment.tap(tapOptions(o?.stage), fn) },
      authMethods: { tap: (fn, o) => this.authMethods.tap(tapOptions(o?.stage), fn) },
      authenticate: { tap: (fn, o) => this.authenticate.tapPromise(tapOptions(o?.stage), fn) },
      checkProject: { tap: (fn, o) => this.checkProject.tapPromise(tapOptions(o?.stage), fn) },
      ready: { tap: (fn, o) => this.ready.tapPromise(tapOptions(o?.stage), fn) },
      serving: { tap: (fn, o) => this.serving.tap(tapOptions(o?.stage), fn) },
      shutdown: { tap: (fn, o) => this.shutdown.tapPromise(tapOptions(o?.stage), fn) },
      memberConfigKeys: { tap: (fn, o) => this.memberConfigKeys.tapPromise(tapOptions(o?.stage), fn) },
      clusterJoined: { tap: (fn, o) => this.clusterJoined.tapPromise(tapOptions(o?.stage), fn) },
    } satisfies KernelHooks);
  }

  get hasProjectCheck(): boolean {
    return this.checkProject.taps.length > 0;
  }
}
