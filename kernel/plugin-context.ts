/** What each plugin is handed: kernel services, scoped to the plugin (logger, store namespace, hook facades). */
import type Logger from 'bunyan';
import {
  WarningsServiceRef,
  type PluginContext, type PluginManifest, type ServiceRef, type ServiceRegistry, type WarningsService,
} from '../sdk/index.js';
import type { Kernel } from './kernel.js';

export class ServiceTable implements ServiceRegistry {
  private readonly services = new Map<string, { owner: string; impl: unknown }>();
  /** Services a test kit put in place: they win over what plugins provide. */
  private readonly overridden = new Set<string>();
  constructor(private readonly owner = 'kernel', private readonly shared?: ServiceTable) {}

  provide<T>(ref: ServiceRef<T>, impl: T): void {
    const table = this.shared ?? this;
    if (table.overridden.has(ref.id)) return;
    const existing = table.services.get(ref.id);
    if (existing) throw new Error(`service "${ref.id}" is provided by both ${existing.owner} and ${this.owner}`);
    table.services.set(ref.id, { owner: this.owner, impl });
  }

  get<T>(ref: ServiceRef<T>): T | undefined {
    return (this.shared ?? this).services.get(ref.id)?.impl as T | undefined;
  }

  /** A test kit's stand-in for `ref`, in place before any plugin registers. */
  override(ref: ServiceRef<unknown>, impl: unknown): void {
    const table = this.shared ?? this;
    table.services.set(ref.id, { owner: 'test override', impl });
    table.overridden.add(ref.id);
  }

  /** The same table, recording `owner` on what it provides. */
  scoped(owner: string): ServiceTable {
    return new ServiceTable(owner, this.shared ?? this);
  }
}

/** Warnings go to whoever provides the service (the warnings plugin); without it they are logged. */
export function warningsFacade(services: ServiceRegistry, log: Logger): WarningsService {
  return {
    async raise(warning) {
      const provider = services.get(WarningsServiceRef);
      if (provider) await provider.raise(warning);
      else log.warn({ warning }, warning.message);
    },
    async resolve(type, entityUrl) {
      await services.get(WarningsServiceRef)?.resolve(type, entityUrl);
    },
  };
}

export function createPluginContext(kernel: Kernel, manifest: PluginManifest): PluginContext {
  const log = kernel.log.child({ plugin: manifest.id });
  const services = kernel.services.scoped(manifest.id);
  return Object.freeze({
    id: manifest.id,
    version: manifest.version,
    log,
    dataDir: kernel.dataDir,
    get serverName() {
      return kernel.cluster.serverName;
    },
    cluster: kernel.cluster,
    routes: { add: (route) => kernel.pipeline.add(manifest.id, route) },
    keys: kernel.keys,
    serverConfig: kernel.serverConfig,
    store: kernel.store.namespace(manifest.provides?.dbNamespace ?? manifest.id),
    operations: kernel.operations,
    events: kernel.events,
    warnings: warningsFacade(services, log),
    hostTools: kernel.hostTools,
    hooks: kernel.hooks.facade(manifest.id),
    services,
    extensionPoints: kernel.extensionPoints.scoped(manifest.id),
    catalog: kernel.catalog,
    listeners: { forPaths: (paths: string[]) => kernel.pathListener(manifest.id, paths) },
    hasExtension: (name: string) => kernel.extensions.has(name),
    refreshServerInfo: () => kernel.info.invalidate(),
  } satisfies PluginContext);
}
