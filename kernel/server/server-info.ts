/** The GET /1.0 document, built once and rebuilt only when config, extensions or environment change. */
import type { SyncWaterfallHook } from 'tapable';
import type { HostFacts } from './host-facts.js';
import type { ServerConfig } from '../../sdk/index.js';

export const API_VERSION = '1.0';
export const SERVER_VERSION = '5.0.2';

export interface ServerInfoSources {
  facts: HostFacts;
  config: ServerConfig & { visible(): Record<string, string | boolean> };
  extensions: () => readonly string[];
  environmentHook: SyncWaterfallHook<[Record<string, unknown>]>;
  authMethodsHook: SyncWaterfallHook<[string[]]>;
  certificate: () => { cert: string; fingerprint: string } | undefined;
  httpsAddresses: () => string[];
}

export class ServerInfo {
  private trustedView: Record<string, unknown> | undefined;
  /** Views for other projects differ only in environment.project; kept until the next invalidation. */
  private readonly projectViews = new Map<string, Record<string, unknown>>();
  private untrustedView: Record<string, unknown> | undefined;
  private etagContent: { config: Record<string, string | boolean> } | undefined;

  constructor(private readonly sources: ServerInfoSources) {}

  invalidate(): void {
    this.trustedView = undefined;
    this.projectViews.clear();
    this.untrustedView = undefined;
    this.etagContent = undefined;
  }

  /** The same object until invalidated, so the pipeline serialises it once. */
  trusted(project = 'default'): Record<string, unknown> {
    this.trustedView ??= this.build();
    if (project === 'default') return this.trustedView;
    let view = this.projectViews.get(project);
    if (!view) {
      const base = this.trustedView;
      view = { ...base, environment: { ...(base.environment as Record<string, unknown>), project } };
      if (this.projectViews.size < 256) this.projectViews.set(project, view);
    }
    return view;
  }

  untrusted(): Record<string, unknown> {
    this.untrustedView ??= {
      api_extensions: this.sources.extensions(),
      api_status: 'stable',
      api_version: API_VERSION,
      auth: 'untrusted',
      public: false,
      auth_methods: this.authMethods(),
    };
    return this.untrustedView;
  }

  /** The user-modifiable part (what PUT /1.0 changes): the ETag is computed from it. */
  editable(): { config: Record<string, string | boolean> } {
    this.etagContent ??= { config: this.sources.config.visible() };
    return this.etagContent;
  }

  /** Every client sees the same list, trusted or not, as clients pick how to log in from it. */
  private authMethods(): string[] {
    return this.sources.authMethodsHook.call(['tls']);
  }

  private build(): Record<string, unknown> {
    const { facts } = this.sources;
    const cert = this.sources.certificate();
    const base: Record<string, unknown> = {
      addresses: this.sources.httpsAddresses(),
      architectures: facts.architectures,
      certificate: cert?.cert ?? '',
      certificate_fingerprint: cert?.fingerprint ?? '',
      driver: '',
      driver_version: '',
      firewall: facts.firewall,
      kernel: facts.kernel,
      kernel_architecture: facts.kernel_architecture,
      kernel_features: facts.kernel_features,
      kernel_version: facts.kernel_version,
      os_name: facts.os_name,
      os_version: facts.os_version,
      project: 'default',
      server: 'lxd',
      server_clustered: false,
      server_event_mode: 'full-mesh',
      server_name: facts.server_name,
      server_pid: process.pid,
      server_version: SERVER_VERSION,
      storage: '',
      storage_version: '',
      storage_supported_drivers: [],
    };
    const environment = this.sources.environmentHook.call(base);
    return {
      config: this.sources.config.visible(),
      api_extensions: this.sources.extensions(),
      api_status: 'stable',
      api_version: API_VERSION,
      auth: 'trusted',
      public: false,
      auth_methods: this.authMethods(),
      environment,
    };
  }
}
