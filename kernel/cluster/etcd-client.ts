/**
 * The kernel's connection to the cluster database: TLS with this member's etcd certificate, every
 * unary call bounded, and a probe so that requests fail at once (503) while the cluster has no leader
 * instead of each waiting out its deadline. It recovers by itself.
 *
 * It talks to one etcd member at a time: the member beside the daemon while that one votes; a learner
 * (`database-standby`) serves no reads or watches, so a standby member uses a voter, and moves back
 * to its own member once promoted. Whoever watches is told when the member in use changes.
 */
import { Etcd3, GRPCDeadlineExceededError, GRPCUnavailableError, EtcdError, ClientClosedError, type WatchBuilder, type Watcher } from 'etcd3';
import { noop } from 'cockatiel';
import { unavailable, type EtcdTls } from '../../sdk/index.js';

/** Bound of one etcd call: longer than an election (leader loss), shorter than a client's patience. */
export const ETCD_CALL_BOUND_MS = 3_000;
/** How often the member in use is asked whether the cluster has a leader. */
const QUORUM_PROBE_MS = 250;
/** Every this many probes, the list of voters is read again (members come and go). */
const MEMBERS_REFRESH_PROBES = 20;

const NO_QUORUM = 'The cluster database has no quorum (too few database members are reachable); try again later';

export class EtcdConnection {
  private readonly clients = new Map<string, Etcd3>();
  private endpoint: string;
  /** Why calls are refused right now, or undefined while the cluster has a leader. */
  private down: string | undefined;
  private probe: NodeJS.Timeout | undefined;
  private probing: Promise<boolean> | undefined;
  private probes = 0;
  private readonly switchListeners = new Set<() => void>();
  private closed = false;
  /** Every watch started here, to take off the client's watch manager at close. */
  private readonly watchers = new Set<Watcher>();

  /** `local`: the member beside the daemon; `others`: the other members' client URLs as last known. */
  private constructor(private readonly local: string, private others: string[], private readonly tls: EtcdTls) {
    this.endpoint = local;
    this.probe = setInterval(() => void this.checkQuorum(), QUORUM_PROBE_MS);
    this.probe.unref();
  }

  /** Connect, choosing the member to use (the local one unless it is a learner). */
  static async open(localClientUrl: string, others: string[], tls: EtcdTls): Promise<EtcdConnection> {
    const conn = new EtcdConnection(localClientUrl, others, tls);
    if (!(await conn.checkQuorum())) {
      const reason = conn.down;
      conn.close();
      throw unavailable(reason ?? NO_QUORUM);
    }
    return conn;
  }

  /** The etcd3 client of the member in use (it may change: see onSwitch). */
  get client(): Etcd3 {
    return this.clientFor(this.endpoint);
  }

  get current(): string {
    return this.endpoint;
  }

  /** True while the member in use knows a leader. */
  get healthy(): boolean {
    return this.down === undefined;
  }

  /** Called after the member in use changed: watches must be made again on the new client. */
  onSwitch(listener: () => void): () => void {
    this.switchListeners.add(listener);
    return () => this.switchListeners.delete(listener);
  }

  private clientFor(url: string): Etcd3 {
    let client = this.clients.get(url);
    if (!client) {
      if (this.closed) throw new ClientClosedError('cluster database connection');
      client = new Etcd3({
        hosts: [url],
        credentials: { rootCertificate: Buffer.from(this.tls.ca), certChain: Buffer.from(this.tls.cert), privateKey: Buffer.from(this.tls.key) },
        defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + ETCD_CALL_BOUND_MS }),
        dialTimeout: ETCD_CALL_BOUND_MS,
        // Our own bound and probe decide; the client's retries and circuit breaker would hide both.
        faultHandling: { host: () => noop, global: noop },
      });
      this.clients.set(url, client);
    }
    return client;
  }

  /** Run one etcd call: refused at once without quorum; a timeout or lost connection is a 503 too. */
  async call<R>(fn: (client: Etcd3) => Promise<R>): Promise<R> {
    if (this.down) throw unavailable(this.down);
    try {
      return await fn(this.client);
    } catch (err) {
      if (isUnreachable(err)) {
        this.down = NO_QUORUM;
        void this.checkQuorum();
        throw Object.assign(unavailable(NO_QUORUM), { cause: err });
      }
      throw err;
    }
  }

  /** Start a watch (etcd3 waits for the stream without a bound): a 503 when it is not there in time. */
  async watch(build: (client: Etcd3) => WatchBuilder): Promise<Watcher> {
    if (this.down) throw unavailable(this.down);
    let timer: NodeJS.Timeout | undefined;
    const pending = build(this.client).create();
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(unavailable(NO_QUORUM)), ETCD_CALL_BOUND_MS);
    });
    try {
      const watcher = await Promise.race([pending, late]);
      this.watchers.add(watcher);
      watcher.once('end', () => this.watchers.delete(watcher));
      return watcher;
    } catch (err) {
      // A watch that arrives after all is not left running.
      void pending.then((w) => w.cancel()).catch(() => undefined);
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Whether the member in use knows a leader; moves to another member when that is better. */
  checkQuorum(): Promise<boolean> {
    this.probing ??= this.choose().finally(() => {
      this.probing = undefined;
    });
    return this.probing;
  }

  /** Whether the etcd member at `url` answers a status request (bounded). */
  async answers(url: string): Promise<boolean> {
    return (await this.statusOf(url)) !== undefined;
  }

  /** A member's status, or undefined when it does not answer (bounded). */
  private async statusOf(url: string) {
    try {
      return await this.clientFor(url).maintenance.status({ deadline: Date.now() + QUORUM_PROBE_MS * 4 });
    } catch {
      return undefined;
    }
  }

  private async choose(): Promise<boolean> {
    if (this.closed) return false;
    const usable = (s: Awaited<ReturnType<EtcdConnection['statusOf']>>) => Boolean(s && !s.isLearner && s.leader && s.leader !== '0');
    const local = await this.statusOf(this.local);
    let chosen: string | undefined;
    if (usable(local)) chosen = this.local;
    else if (local && !local.isLearner) chosen = undefined; // a voter beside us without a leader: no quorum here
    else {
      // The local member is a learner or does not answer: the member in use if it is still good, else another.
      const candidates = [this.endpoint, ...this.others].filter((u, i, all) => u !== this.local && all.indexOf(u) === i);
      for (const url of candidates) {
        if (this.closed) return false;
        if (usable(await this.statusOf(url))) {
          chosen = url;
          break;
        }
      }
    }
    if (!chosen) {
      this.down = NO_QUORUM;
      return false;
    }
    if (chosen !== this.endpoint) {
      this.endpoint = chosen;
      for (const listener of this.switchListeners) listener();
    }
    this.down = undefined;
    if (++this.probes % MEMBERS_REFRESH_PROBES === 0) void this.refreshMembers();
    return true;
  }

  /** Remember the other voters' client URLs, for when the member in use goes away. */
  private async refreshMembers(): Promise<void> {
    try {
      const list = await this.client.cluster.memberList({});
      const others = list.members.filter((m) => !m.isLearner).flatMap((m) => m.clientURLs).filter((u) => u !== this.local);
      if (others.length) this.others = others;
    } catch { /* next time */ }
  }

  close(): void {
    this.closed = true;
    clearInterval(this.probe);
    this.probe = undefined;
    this.switchListeners.clear();
    // etcd3 1.1.2 keeps reconnecting the watch stream of a closed client while watchers are attached
    // (a ref'd timer, forever): take them off its manager first.
    for (const watcher of this.watchers) {
      const manager = (watcher as unknown as { manager?: WatchManagerInternals }).manager;
      if (manager) {
        manager.watchers = manager.watchers.filter((w) => w !== watcher);
        manager.expectedClosers.delete(watcher);
        // A response already on its way for a watcher taken off would make etcd3 throw from its stream
        // handler (an uncaught error): the client is closing, so whatever still arrives is dropped.
        manager.handleResponse = () => undefined;
      }
    }
    this.watchers.clear();
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }
}

/** The parts of etcd3's (1.1.2) private watch manager that close() has to reach. */
interface WatchManagerInternals {
  watchers: Watcher[];
  expectedClosers: Set<Watcher>;
  handleResponse: (res: unknown) => void;
}

/** Errors that mean the cluster cannot answer now (as opposed to a refused request). */
export function isUnreachable(err: unknown): boolean {
  // etcd refusing a membership change to protect its quorum (as UNAVAILABLE) is an answer, not an outage.
  if (/unhealthy cluster|not supported for learner|not in sync/.test((err as Error | undefined)?.message ?? '')) return false;
  if (err instanceof GRPCDeadlineExceededError || err instanceof GRPCUnavailableError) return true;
  if (err instanceof ClientClosedError) return true;
  const message = (err as Error | undefined)?.message ?? '';
  if (err instanceof EtcdError || /etcdserver:/.test(message)) {
    return /no leader|request timed out|leader changed|timed out|too many requests/.test(message);
  }
  // A member that is starting (a standby being demoted, a restart) answers plain HTTP before its gRPC
  // service is up: grpc-js calls that UNKNOWN, "Received HTTP status code 200".
  return /deadline exceeded|unavailable|ECONNREFUSED|connection|Received HTTP status code/i.test(message);
}
