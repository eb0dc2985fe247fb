/** What a plugin is, what it declares and what the kernel hands it. */
import type Logger from 'bunyan';
import type { RouteDescriptor } from './routes.js';
import type { ConfigKeyRegistry, ServerConfig } from './config-keys.js';
import type { Store } from './store.js';
import type { OperationsService } from './operations.js';
import type { EventsService } from './events.js';
import type { HostTools } from './host-tools.js';
import type { KernelHooks } from './hooks.js';
import type { ExtensionPointRegistry, ServiceRegistry } from './services.js';
import type { WarningsService } from './warnings.js';
import type { PluginCatalog } from './type-registry.js';
import type { ClusterView } from './cluster.js';

/** One entry of plugin-registry.json. The kernel reads it without running any plugin code. */
export interface PluginManifest {
  id: string;
  /** Module path relative to the registry file (`.ts` sources map to the compiled tree). */
  entry: string;
  version: string;
  /** semver range of the sdk this plugin was written against. */
  sdk: string;
  family?: string;
  kind?: 'host' | 'driver' | 'feature';
  description?: string;
  /** Plugin ids with semver ranges. */
  requires?: Record<string, string>;
  provides?: {
    /** api_extensions names this plugin makes true. */
    extensions?: string[];
    /** Config key prefixes or exact keys it owns. */
    configKeys?: string[];
    /** Driver and type names claimed outside any extension point (older manifests; prefer `registers`). */
    drivers?: string[];
    types?: string[];
    /**
     * Names this plugin registers into other plugins' extension points, by point:
     * `{ "nic-type": ["example"] }`. Two enabled plugins may not register one name into one point.
     */
    registers?: Record<string, string[]>;
    /**
     * Extension points this plugin offers, each with the names the API defines for it, so that
     * a name no enabled plugin registers is answered as "not enabled in this build".
     */
    extensionPoints?: Record<string, string[]>;
    /** Namespace of its collections in the state store (default: the plugin id). */
    dbNamespace?: string;
  };
  /** Binaries the plugin needs on the host. */
  hostTools?: string[];
}

export interface PluginContext {
  readonly id: string;
  readonly version: string;
  readonly log: Logger;
  /** The daemon's data directory. */
  readonly dataDir: string;
  /** Name of this server (event `location`): "none" standalone, the member name in a cluster (it can change). */
  readonly serverName: string;
  /** The cluster as the kernel knows it (standalone: not enabled, no members). */
  readonly cluster: ClusterView;
  readonly routes: { add(route: RouteDescriptor): void };
  readonly keys: ConfigKeyRegistry;
  readonly serverConfig: ServerConfig;
  /** This plugin's namespace of the state store. */
  readonly store: Store;
  readonly operations: OperationsService;
  readonly events: EventsService;
  readonly warnings: WarningsService;
  readonly hostTools: HostTools;
  readonly hooks: KernelHooks;
  readonly services: ServiceRegistry;
  /** Registration points of the plugins this one depends on; open during `register()` only. */
  readonly extensionPoints: ExtensionPointRegistry;
  /** The manifests of the whole registry (what exists, enabled in this build or not). */
  readonly catalog: PluginCatalog;
  /** Further HTTPS listeners that serve only some of the API (as `core.metrics_address` does). */
  readonly listeners: ListenerFactory;
  /** Whether an api_extensions name is advertised by this build. */
  hasExtension(name: string): boolean;
  /** Recompute the cached GET /1.0 answer (after an `environment` contribution changed). */
  refreshServerInfo(): void;
}

export interface CorralPlugin {
  /** Synchronous: add routes, keys, taps, services, extension points. Runs in dependency order. */
  register(ctx: PluginContext): void;
  /** Asynchronous start-up (migrations, probing the host), in dependency order after every register. */
  boot?(ctx: PluginContext): Promise<void>;
  /** Clean shutdown, in reverse dependency order. */
  shutdown?(ctx: PluginContext): Promise<void>;
}

export function definePlugin(plugin: CorralPlugin): CorralPlugin {
  return plugin;
}

/**
 * An HTTPS listener beside the main one, with the same server certificate and client authentication,
 * serving only the paths it was made for (and the server's root, `/` and `/1.0`); anything else is 404.
 */
export interface PathListener {
  /** Starts, moves or stops (`''`) the listener; refuses an address it cannot listen on. */
  apply(address: string): Promise<void>;
  /** Throws a plain Error (a config key's validator) when `address` is no listen address. */
  validate(address: string): void;
}

export interface ListenerFactory {
  /** A listener for `paths` (route paths as declared, aliases included); stopped with the daemon. */
  forPaths(paths: string[]): PathListener;
}
