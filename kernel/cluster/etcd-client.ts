/**
 * The kernel's connection to the etcd member beside the daemon: TLS with this member's etcd
 * certificate, every unary call bounded, and a quorum watch so that requests fail at once (503) while
 * the cluster has no leader instead of each waiting out its deadline. It recovers by itself.
 */
import { Etcd3, GRPCDeadlineExceededError, GRPCUnavailableError, EtcdError, ClientClosedError } from 'etcd3';
import { noop } from 'cockatiel';
import { unavailable, type EtcdTls } from '../../sdk/index.js';

/** Bound of one etcd call: longer than an election (leader loss), shorter than a client's patience. */
export const ETCD_CALL_BOUND_MS = 3_000;
/** How often the local member is asked whether the cluster has a leader. */
const QUORUM_PROBE_MS = 250;

const NO_QUORUM = 'The cluster database has no quorum (too few database members are reachable); try again later';

export class EtcdConnection {
  readonly client: Etcd3;
  /** Why calls are refused right now, or undefined while the cluster has a leader. */
  private down: string | undefined;
  private probe: NodeJS.Timeout | undefined;
  private probing = false;

  constructor(endpoints: string[], tls: EtcdTls) {
    this.client = new Etcd3({
      hosts: endpoints,
      credentials: { rootCertificate: Buffer.from(tls.ca), certChain: Buffer.from(tls.cert), privateKey: Buffer.from(tls.key) },
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + ETCD_CALL_BOUND_MS }),
      dialTimeout: ETCD_CALL_BOUND_MS,
      // Our own bound and quorum watch decide; the client's retries and circuit breaker would hide both.
      faultHandling: { host: () => noop, global: noop },
    });
    this.probe = setInterval(() => void this.checkQuorum(), QUORUM_PROBE_MS);
    this.probe.unref();
  }

  /**
   * The connection a member's store uses: its own etcd member when that is a voter; a learner serves
   * no reads or watches, so a standby member reaches the cluster database through the voters.
   */
  static async open(localClientUrl: string, others: string[], tls: EtcdTls): Promise<EtcdConnection> {
    const local = new EtcdConnection([localClientUrl], tls);
    try {
      // A learner answers Status (and serializable reads) only: the other members are known from the initial cluster.
      const status = await local.call((c) => c.maintenance.status());
      if (!status.isLearner) return local;
      if (!others.length) throw unavailable('The cluster database has no other member to reach');
      local.close();
      return new EtcdConnection(others, tls);
    } catch (err) {
      local.close();
      throw err;
    }
  }

  /** True while the member beside us sees a leader. */
  get healthy(): boolean {
    return this.down === undefined;
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

  /** Ask the local member whether it knows a leader (a serializable, local call). */
  async checkQuorum(): Promise<boolean> {
    if (this.probing) return this.healthy;
    this.probing = true;
    try {
      const status = await this.client.maintenance.status({ deadline: Date.now() + QUORUM_PROBE_MS * 4 });
      this.down = status.leader && status.leader !== '0' ? undefined : NO_QUORUM;
    } catch {
      this.down = NO_QUORUM;
    } finally {
      this.probing = false;
    }
    return this.healthy;
  }

  close(): void {
    clearInterval(this.probe);
    this.probe = undefined;
    this.client.close();
  }
}

/** Errors that mean the cluster cannot answer now (as opposed to a refused request). */
export function isUnreachable(err: unknown): boolean {
  if (err instanceof GRPCDeadlineExceededError || err instanceof GRPCUnavailableError) return true;
  if (err instanceof ClientClosedError) return true;
  const message = (err as Error | undefined)?.message ?? '';
  if (err instanceof EtcdError || /etcdserver:/.test(message)) {
    return /no leader|request timed out|leader changed|not capable|timed out|too many requests|unhealthy cluster/.test(message);
  }
  return /deadline exceeded|unavailable|ECONNREFUSED|connection/i.test(message);
}
