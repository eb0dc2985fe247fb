/**
 * The microkernel: validates the plugin set, opens the store, wires the kernel services, runs the
 * plugins' register and boot phases in dependency order, and serves the API on its listeners.
 * It knows no family: everything else arrives through plugins.
 */
import path from 'node:path';
import { chmod } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import type Hapi from '@hapi/hapi';
import type Logger from 'bunyan';
import {
  ClusterControlRef, type CorralPlugin, type HostTools, type PathListener, type PluginCatalog, type PluginContext, type PluginManifest, type ServiceRef, type ShutdownInfo,
} from '../sdk/index.js';
import { createLogger, levelName, LOG_LEVELS, type LogOutputs, type LogRecord } from './logging/logger.js';
import { createHostTools, findOnPath } from './host-tools/host-tools.js';
import { DocumentStore } from './store/document-store.js';
import { KeyRegistry } from './config/key-registry.js';
import { ServerConfigStore } from './config/server-config.js';
import { ExtensionRegistry } from './extensions/registry.js';
import { EventHub } from './events/hub.js';
import { eventRoutes } from './events/routes.js';
import { OPERATION_ABORT_GRACE_MS, OperationManager } from './operations/manager.js';
import { withinBound } from './bounded.js';
import { KernelClusterView } from './cluster/cluster-view.js';
import { ClusterTraffic } from './cluster/forwarding.js';
import { LazyClusterControl } from './cluster/lazy-cluster-control.js';
import { operationRoutes } from './operations/routes.js';
import { RoutePipeline } from './http/pipeline.js';
import { createHapiServer, tlsCaller, UNIX_CALLER } from './http/listeners.js';
import { attachWebsockets, closeAllWebsockets } from './http/websocket.js';
import { TlsListener, validateListenAddress } from './http/tls-listener.js';
import { HttpSettings, registerHttpKeys } from './http/http-settings.js';
import { KernelHookSet } from './hooks.js';
import { ExtensionPointTable } from './extension-points.js';
import { ServiceTable, createPluginContext, warningsFacade } from './plugin-context.js';
import { PluginSetError, catalogOf, entryPath, readRegistry, resolvePluginSet } from './loader/plugin-set.js';
import { probeHostFacts } from './server/host-facts.js';
import { API_VERSION, SERVER_VERSION, ServerInfo } from './server/server-info.js';
import { ROOT_PATHS, serverRoutes } from './server/routes.js';
import { describeApi } from './openapi/document.js';
import { openApiRoute } from './openapi/route.js';
import { addUnixOnlyRoutes } from './server/unix-only-routes.js';
import { ensureServerCertificate, writeServerCertificate, type ServerCertificate } from './tls/server-certificate.js';
import { ChangeActivity } from './change-activity.js';
import { resumeOptimizerSoon } from './boot-optimizer.js';

export interface KernelOptions {
  dataDir: string;
  /** sqlite file, or ':memory:'. */
  storeFile: string;
  registryFile: string;
  /** A set name or a comma-separated list of plugin ids. */
  plugins: string;
  /** Root of the compiled tree (where `.ts` entries are found as `.js`). */
  compiledRoot: string;
  /** Listen on this unix socket; without it the kernel only serves `inject`. */
  socketPath?: string;
  logToStdout?: boolean;
  logToFile?: boolean;
  logLevel?: Logger.LogLevel;
  /** Generate/load the TLS server certificate (default true; test kernels skip it). */
  serverCertificate?: boolean;
  /** Seconds to let running operations finish at shutdown. */
  shutdownTimeout?: number;
  /** The daemon's way to stop itself as a host shutdown does, for `corrald shutdown` (unix socket only). */
  onShutdownRequest?: () => void;
  /**
   * Plugin modules already imported, by plugin id (a bundled daemon carries its set inside it).
   * When given, a plugin of the set that is not here is an error rather than an import of its file:
   * a bundle's plugins share one copy of the sdk, which a plugin loaded beside them would not.
   */
  pluginModules?: Readonly<Record<string, unknown>>;
  /** Test kits only: the host-tools service to hand plugins instead of the real one. */
  hostTools?: HostTools;
  /** Test kits only: services put in place before any plugin registers; a plugin's own provide of these is ignored. */
  serviceOverrides?: ServiceOverride[];
}

/** One service a test puts in place of (or beside) what the plugins provide. */
export interface ServiceOverride {
  ref: ServiceRef<unknown>;
  impl: unknown;
}

interface LoadedPlugin {
  manifest: PluginManifest;
  plugin: CorralPlugin;
  ctx: PluginContext;
}

/** Bound of one shutdown step (a plugin's shutdown, closing a listener or the store). */
const STEP_BOUND_MS = 5_000;
/** How long requests in flight get at shutdown before their connections are cut. */
const LISTENER_DRAIN_MS = 2_000;
/** A host shutdown waits for the instances to stop, each within its own timeout; this caps the lot. */
const HOST_SHUTDOWN_BOUND_MS = 10 * 60_000;

export class Kernel {
  readonly cluster = new KernelClusterView();
  readonly events = new EventHub(() => this.cluster.serverName);
  readonly hooks = new KernelHookSet();
  readonly keys = new KeyRegistry();
  readonly extensions = new ExtensionRegistry();
  readonly services = new ServiceTable();
  readonly extensionPoints = new ExtensionPointTable();
  /** Every manifest of the registry file, enabled or not (set before any plugin registers). */
  catalog: PluginCatalog = catalogOf([]);
  readonly operations: OperationManager;
  readonly log: Logger;
  private readonly logOutputs: LogOutputs;
  readonly hostTools: HostTools;
  readonly pipeline: RoutePipeline;
  /** Forwarding, member-to-member requests, other members' operations and events. */
  readonly clusterTraffic: ClusterTraffic;
  readonly dataDir: string;
  store!: DocumentStore;
  clusterControl!: LazyClusterControl;
  serverConfig!: ServerConfigStore;
  info!: ServerInfo;
  private certificate: ServerCertificate | undefined;
  private plugins: LoadedPlugin[] = [];
  private unix: Hapi.Server | undefined;
  private injector: Hapi.Server | undefined;
  private readonly tls: TlsListener;
  /** Listeners plugins asked for, serving part of the API (metrics). */
  private readonly partial: TlsListener[] = [];
  /** CORS headers and trusted proxies, kept current by their config keys. */
  private readonly http = new HttpSettings();
  private stopping: Promise<void> | undefined;
  /** The daemon's own changes in progress (requests other than reads, running operations). */
  private readonly changes = new ChangeActivity();

  private constructor(private readonly opts: KernelOptions) {
    this.dataDir = opts.dataDir;
    ({ log: this.log, outputs: this.logOutputs } = createLogger({
      dataDir: opts.logToFile ? opts.dataDir : undefined,
      stdout: opts.logToStdout,
      level: opts.logLevel,
      sink: (record) => this.forwardLog(record),
    }));
    this.hostTools = opts.hostTools ?? createHostTools(this.log.child({ component: 'host-tools' }), { answersFile: path.join(opts.dataDir, 'host-tool-answers.json') });
    for (const { ref, impl } of opts.serviceOverrides ?? []) this.services.override(ref, impl);
    this.operations = new OperationManager(this.events, () => this.cluster.serverName, this.changes);
    this.clusterTraffic = new ClusterTraffic(this.cluster, this.events, () => this.certificate, this.log);
    this.pipeline = new RoutePipeline({
      log: this.log,
      checkProject: (req) => (this.hooks.hasProjectCheck ? this.hooks.checkProject.promise(req) : Promise.resolve()),
      projectsChecked: () => this.hooks.hasProjectCheck,
      clusterable: () => this.extensions.has('clustering'),
      clustered: () => this.cluster.enabled,
      serverName: () => this.cluster.serverName,
      forwarding: this.clusterTraffic.forwarding,
      activity: this.changes,
      // Read when answering, after boot: the store is open by then.
      storeRevision: () => this.store.revision(),
    });
    this.tls = new TlsListener((host, port) => this.startTls(host, port));
  }

  static async start(opts: KernelOptions): Promise<Kernel> {
    // Validate the whole set before any plugin code runs.
    const registry = readRegistry(opts.registryFile);
    const set = resolvePluginSet(registry, opts.plugins, path.dirname(opts.registryFile));
    await checkHostTools(set.plugins, opts.hostTools?.which ?? findOnPath);

    const kernel = new Kernel(opts);
    kernel.catalog = set.catalog;
    try {
      await kernel.boot(set.plugins, set.kernelExtensions);
    } catch (err) {
      await kernel.stop().catch(() => undefined);
      throw err;
    }
    return kernel;
  }

  /** The module of a plugin: handed in by a bundle, or imported from its entry file. */
  private async pluginModule(manifest: PluginManifest): Promise<unknown> {
    const given = this.opts.pluginModules;
    if (given) {
      if (Object.hasOwn(given, manifest.id)) return given[manifest.id];
      throw new PluginSetError([`${manifest.id}: this daemon is a bundle of the plugins ${Object.keys(given).join(', ')}; run dist/bin/corrald.js for other plugins`]);
    }
    const file = entryPath(path.dirname(this.opts.registryFile), manifest.entry, this.opts.compiledRoot);
    return import(pathToFileURL(file).href).catch((err: Error) => {
      throw new PluginSetError([`${manifest.id}: cannot load ${manifest.entry}: ${err.message}`]);
    });
  }

  private async boot(manifests: PluginManifest[], kernelExtensions: string[]): Promise<void> {
    const started = Date.now();
    this.clusterControl = new LazyClusterControl({
      dataDir: this.dataDir,
      storeFile: this.opts.storeFile,
      hostTools: this.hostTools,
      log: this.log.child({ component: 'cluster' }),
      view: this.cluster,
      store: () => this.store,
      replaceCertificate: (cert, key) => this.replaceCertificate(cert, key),
      certificate: () => this.certificate,
      hooks: this.hooks,
    });
    this.services.provide(ClusterControlRef, this.clusterControl);
    // A member that was clustered comes back on etcd, before any plugin reads the store.
    this.store = (await this.clusterControl.resume()) ?? await DocumentStore.open(this.opts.storeFile);
    const kernelStore = this.store.namespace('kernel');
    this.serverConfig = new ServerConfigStore(kernelStore, this.keys, this.dataDir);
    this.serverConfig.onRollbackFailure = (key, err) => {
      this.log.error({ err, key }, 'could not restore the previous value of a server key');
      void warningsFacade(this.services, this.log).raise({ type: 'Server configuration not applied', message: `${key}: ${err.message}`, severity: 'high' });
    };
    const facts = await probeHostFacts();
    this.info = new ServerInfo({
      facts,
      config: this.serverConfig,
      extensions: () => this.extensions.list(),
      environmentHook: this.hooks.environment,
      authMethodsHook: this.hooks.authMethods,
      certificate: () => this.certificate,
      httpsAddresses: () => (this.tls.current ? [this.tls.current] : []),
    });

    this.extensions.claim('the kernel', kernelExtensions);
    this.registerKernelKeys();
    const apiDescription = openApiRoute(() => this.describeApi(), () => this.pipeline.sealed);
    for (const route of [...serverRoutes(this.info, this.serverConfig, this.events), ...operationRoutes(this.operations, { enabled: () => this.cluster.enabled, owners: this.clusterTraffic.owners }), ...eventRoutes(this.events), apiDescription]) {
      this.pipeline.add('kernel', route);
    }

    // Import only the enabled plugins, then register (sync) and boot (async), dependencies first.
    for (const manifest of manifests) {
      const mod = (await this.pluginModule(manifest)) as { default?: CorralPlugin };
      if (!mod.default || typeof mod.default.register !== 'function') {
        throw new PluginSetError([`${manifest.id}: ${manifest.entry} does not export a plugin (default export with register())`]);
      }
      this.extensions.claim(manifest.id, manifest.provides?.extensions ?? []);
      this.plugins.push({ manifest, plugin: mod.default, ctx: createPluginContext(this, manifest) });
    }
    for (const { manifest, plugin, ctx } of this.plugins) {
      try {
        plugin.register(ctx);
      } catch (err) {
        throw new Error(`plugin ${manifest.id} failed to register: ${(err as Error).message}`);
      }
    }
    // What families know (drivers, device types) is settled before anything boots.
    this.extensionPoints.close();
    // The code is loaded. What the boots do grows with the daemon's instances: they get the optimizer back soon.
    resumeOptimizerSoon();
    this.log.debug('plugins registered, booting them');
    // A standalone server's pair is made or read while the plugins boot (a first start makes a key and
    // signs it); a clustered member's boot may put the cluster's pair in the data dir, so it waits for them.
    const loadCertificate = () => ensureServerCertificate(this.dataDir).catch((err: Error) => err);
    const earlyCertificate = this.opts.serverCertificate !== false && !this.cluster.enabled ? loadCertificate() : undefined;
    await this.serverConfig.load();
    for (const { manifest, plugin, ctx } of this.plugins) {
      try {
        const booting = Date.now();
        await plugin.boot?.(ctx);
        // Where a slow start goes, for whoever runs with --debug.
        this.log.debug({ plugin: manifest.id, ms: Date.now() - booting }, 'plugin booted');
      } catch (err) {
        throw new Error(`plugin ${manifest.id} failed to boot: ${(err as Error).message}`);
      }
    }

    const phases: Record<string, number> = {};
    let phaseStart = Date.now();
    const phase = (name: string) => {
      phases[name] = Date.now() - phaseStart;
      phaseStart = Date.now();
    };
    if (this.opts.serverCertificate !== false) {
      const loaded = await (earlyCertificate ?? loadCertificate());
      // Raised once the warnings' plugin has booted.
      if (loaded instanceof Error) {
        await warningsFacade(this.services, this.log).raise({
          type: 'Server certificate unavailable',
          message: `The HTTPS listener cannot start: ${loaded.message}`,
          severity: 'high',
        });
      }
      this.certificate = loaded instanceof Error ? undefined : loaded;
    }
    phase('certificate');
    await this.serverConfig.applyAll();
    this.serverConfig.onChange(() => this.info.invalidate());
    phase('config');
    await this.hooks.ready.promise();
    this.pipeline.seal();
    phase('ready');

    if (this.opts.socketPath) await this.listenUnix(this.opts.socketPath);
    this.clusterTraffic.start();
    phase('listen');
    try {
      this.hooks.serving.call();
    } catch (err) {
      this.log.error({ err }, 'a plugin failed to start its work as the API opened');
    }
    phase('serving');
    this.log.debug({ ms: phases }, 'after the boots');
    this.log.info({ plugins: this.plugins.map((p) => p.manifest.id), ms: Date.now() - started }, 'corral is ready');
  }

  /** The OpenAPI document of the routes this build registered (GET /openapi.json, docs/openapi.json). */
  describeApi(): ReturnType<typeof describeApi> {
    return describeApi(this.pipeline.registered(), {
      apiVersion: API_VERSION,
      serverVersion: SERVER_VERSION,
      apiExtensions: this.extensions.list(),
      projectsChecked: this.hooks.hasProjectCheck,
      clusterable: this.extensions.has('clustering'),
    });
  }

  private registerKernelKeys(): void {
    this.keys.register({
      key: 'core.https_address',
      scope: 'server',
      member: true,
      type: 'address',
      live: true,
      validate: validateListenAddress,
      doc: 'Address to bind for the remote API (HTTPS); unset disables it',
      apply: (value) => this.tls.apply(value),
    });
    registerHttpKeys(this.keys, this.http);
    this.keys.register({
      key: 'core.log_level',
      scope: 'server',
      type: 'string',
      live: true,
      validate: (value) => {
        if (!(LOG_LEVELS as readonly string[]).includes(value)) throw new Error(`must be one of ${LOG_LEVELS.join(', ')}`);
      },
      doc: 'Level of the daemon log (debug, info, warn, error); unset: the --log-level flag, else info',
      // Unset falls back to what the daemon was started with.
      apply: (value) => this.logOutputs.setLevel((value || this.opts.logLevel || 'info') as Logger.LogLevel),
    });
  }

  /** Opens the log file again (SIGHUP, after log rotation moved it away). */
  reopenLog(): void {
    try {
      this.logOutputs.reopen();
      this.log.info('log file reopened');
    } catch (err) {
      // The old file stays in use: a failed reopen must not take the daemon down.
      this.log.error({ err }, 'could not reopen the log file');
    }
  }

  private async listenUnix(socketPath: string): Promise<void> {
    const server = createHapiServer({ log: this.log, socketPath, headers: () => this.http.cors });
    this.pipeline.install(server, { every: UNIX_CALLER });
    if (this.opts.onShutdownRequest) addUnixOnlyRoutes(server, { shutdown: this.opts.onShutdownRequest, log: this.log });
    attachWebsockets(server.listener, this.pipeline, async () => UNIX_CALLER, this.log);
    await server.start();
    await chmod(socketPath, 0o660);
    this.unix = server;
  }

  /** A further HTTPS listener serving only `paths` and the server's root; the owner drives it from its config key. */
  pathListener(owner: string, paths: string[]): PathListener {
    const only = new Set([...ROOT_PATHS, ...paths]);
    const listener = new TlsListener((host, port) => this.startTls(host, port, only));
    this.partial.push(listener);
    this.log.debug({ owner, paths }, 'listener for part of the API defined');
    return { apply: (address) => listener.apply(address), validate: validateListenAddress };
  }

  private async startTls(host: string, port: number, only?: ReadonlySet<string>): Promise<Hapi.Server> {
    if (!this.certificate) throw new Error('the server certificate is missing (it could not be created at start)');
    const server = createHapiServer({
      log: this.log,
      tls: { host, port, key: this.certificate.key, cert: this.certificate.cert },
      headers: () => this.http.cors,
      trustedProxies: () => this.http.trustedProxies,
      // Browsers reach the HTTPS listeners only: the unix socket's clients are not web pages.
      allowedOrigin: () => this.http.allowedOrigin,
    });
    const authenticate = (raw: import('node:http').IncomingMessage, access: string) =>
      tlsCaller(raw, access, (client) => this.hooks.authenticate.promise(client), (fingerprint) => this.clusterTraffic.isPeer(fingerprint));
    this.pipeline.install(server, authenticate, only);
    // A listener for part of the API has no websockets (events, exec): an upgrade there is a plain 404.
    if (!only) attachWebsockets(server.listener, this.pipeline, authenticate, this.log, () => this.http.allowedOrigin);
    await server.start();
    this.info.invalidate();
    return server;
  }

  /** Serve with a new certificate pair from now on (the cluster certificate): written, then every HTTPS listener switches to it. */
  private async replaceCertificate(cert: string, key: string): Promise<void> {
    const certificate = await writeServerCertificate(this.dataDir, cert, key);
    this.certificate = certificate;
    for (const listener of [this.tls, ...this.partial]) listener.setCertificate(cert, key);
    this.info.invalidate();
  }

  /** Dispatch a request without a socket (tests, tools), as a trusted local client. */
  async inject(options: Hapi.ServerInjectOptions | string): Promise<Hapi.ServerInjectResponse> {
    if (!this.injector) {
      const server = createHapiServer({ log: this.log, headers: () => this.http.cors });
      this.pipeline.install(server, { every: UNIX_CALLER });
      await server.initialize();
      this.injector = server;
    }
    return this.injector.inject(options);
  }

  /**
   * Clean shutdown: shutdown hooks, operations finish or are cancelled, plugins stop in reverse order,
   * listeners close. Every step is bounded, so clients holding anything open cannot keep the daemon up.
   */
  stop(info: ShutdownInfo = { hostShutdown: false }): Promise<void> {
    this.stopping ??= (async () => {
      const graceMs = this.shutdownGraceMs();
      const overrun = (step: string, ms: number) => this.log.warn({ step, ms }, 'shutdown step overran its bound; going on without it');
      // A step that fails is logged and the next one still runs.
      const step = (name: string, ms: number, work: () => Promise<unknown>) => withinBound(name, ms, work, overrun)
        .catch((err: Error) => this.log.error({ err, step: name }, 'shutdown step failed'));
      // A host shutdown stops the instances, each with its own boot.host_shutdown_timeout.
      await step('shutdown hooks', info.hostShutdown ? HOST_SHUTDOWN_BOUND_MS : graceMs, () => this.hooks.shutdown.promise(info));
      await this.operations.shutdown(graceMs);
      for (const { manifest, plugin, ctx } of [...this.plugins].reverse()) {
        await step(`plugin ${manifest.id}`, STEP_BOUND_MS, async () => plugin.shutdown?.(ctx));
      }
      this.clusterTraffic.stop();
      closeAllWebsockets();
      // hapi ends idle keep-alive connections at once and cuts the rest after its timeout.
      await step('unix listener', STEP_BOUND_MS, async () => this.unix?.stop({ timeout: LISTENER_DRAIN_MS }));
      await step('https listener', STEP_BOUND_MS, () => this.tls.stop());
      for (const listener of this.partial) await step('https listener for part of the API', STEP_BOUND_MS, () => listener.stop());
      await step('inject server', STEP_BOUND_MS, async () => this.injector?.stop());
      await step('state store', STEP_BOUND_MS, async () => this.store?.close());
      await step('cluster database member', STEP_BOUND_MS, async () => this.clusterControl?.shutdown());
    })();
    return this.stopping;
  }

  /** The longest a whole shutdown can take (the daemon's last resort if it still has not finished). */
  shutdownBoundMs(info: ShutdownInfo): number {
    return (info.hostShutdown ? HOST_SHUTDOWN_BOUND_MS : this.shutdownGraceMs()) + this.shutdownGraceMs()
      + OPERATION_ABORT_GRACE_MS + STEP_BOUND_MS * (this.plugins.length + 4);
  }

  private shutdownGraceMs(): number {
    return (this.opts.shutdownTimeout ?? 30) * 1000;
  }

  /** bunyan records become `logging` events when somebody listens. */
  private forwardLog(record: LogRecord): void {
    if (!this.events.watched('logging')) return;
    const { msg, level, name: _n, hostname: _h, pid: _p, time: _t, v: _v, ...context } = record;
    const flat: Record<string, string> = {};
    for (const [key, value] of Object.entries(context)) flat[key] = typeof value === 'string' ? value : JSON.stringify(value);
    this.events.emit('logging', { message: msg, level: levelName(level), context: flat });
  }
}

/** `which` is the host-tools service's: a test kit's fake says which tools its host has. */
async function checkHostTools(plugins: PluginManifest[], which: HostTools['which']): Promise<void> {
  // Each tool looked up once, all at once: one by one, the edge set's ~45 lookups were a visible part of a cold start.
  const tools = [...new Set(plugins.flatMap((m) => m.hostTools ?? []))];
  const found = new Map(await Promise.all(tools.map(async (tool) => [tool, Boolean(await which(tool))] as const)));
  const missing = plugins.flatMap((m) => (m.hostTools ?? []).filter((tool) => !found.get(tool)).map((tool) => `${m.id} needs "${tool}", which is not installed`));
  if (missing.length) throw new PluginSetError(missing);
}
