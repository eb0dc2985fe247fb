/**
 * The etcd member beside the daemon: started (a new cluster or joining one), supervised (restarted
 * with backoff when it dies, a bounded number of times) and stopped, through the host-tools service.
 * Its data, TLS files and log are under `<dataDir>/cluster/etcd/`.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import path from 'node:path';
import type Logger from 'bunyan';
import { Etcd3 } from 'etcd3';
import { noop } from 'cockatiel';
import type { EtcdMemberUrls, EtcdTls, HostProcess, HostTools } from '../../sdk/index.js';

export { ETCD_CLIENT_PORT, ETCD_PEER_PORT, etcdUrls } from './etcd-urls.js';
/**
 * Raft timing (decision 0055): members sit on one LAN or loopback, so a 50 ms heartbeat and a 500 ms
 * election timeout keep the write stall of a lost leader near half a second.
 */
export const HEARTBEAT_MS = 50;
export const ELECTION_MS = 500;
/** How long a start may take before it counts as failed (a joiner catching up included). */
const START_BOUND_MS = 20_000;
const STOP_BOUND_MS = 5_000;
/** Restarts after crashes: backoff from 200 ms doubling to 5 s; more than this many within a minute, it stays down. */
const MAX_RESTARTS_PER_MINUTE = 10;

export interface EtcdMemberConfig {
  urls: EtcdMemberUrls;
  /** etcd's --initial-cluster: `name=peerUrl,...` (only read at the first start of a data dir). */
  initialCluster: string;
  state: 'new' | 'existing';
}

export class EtcdMember {
  private proc: HostProcess | undefined;
  private stopping = false;
  private restarts: number[] = [];
  private restartTimer: NodeJS.Timeout | undefined;
  private logStream: WriteStream | undefined;
  /** Called after supervision started etcd again (the store's watch resumes by itself). */
  onRestart: (() => void) | undefined;
  /** Called when etcd died too often and supervision gave up. */
  onGiveUp: ((reason: string) => void) | undefined;

  constructor(private readonly hostTools: HostTools, private readonly log: Logger, readonly dir: string, private readonly config: EtcdMemberConfig) {}

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get dataDir(): string {
    return path.join(this.dir, 'data');
  }

  static files(dir: string) {
    return { ca: path.join(dir, 'ca.crt'), caKey: path.join(dir, 'ca.key'), cert: path.join(dir, 'member.crt'), key: path.join(dir, 'member.key') };
  }

  /** Write the TLS files this member will use (and the CA's key, which a member keeps to hand to joiners). */
  static async writeTls(dir: string, tls: EtcdTls, caKey?: string): Promise<void> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const files = EtcdMember.files(dir);
    if (caKey !== undefined) await writeFile(files.caKey, caKey, { mode: 0o600 });
    await writeFile(files.ca, tls.ca, { mode: 0o644 });
    await writeFile(files.cert, tls.cert, { mode: 0o644 });
    await writeFile(files.key, tls.key, { mode: 0o600 });
  }

  private args(): string[] {
    const { urls, initialCluster, state } = this.config;
    const files = EtcdMember.files(this.dir);
    return [
      '--name', urls.name,
      '--data-dir', this.dataDir,
      '--listen-client-urls', urls.clientUrl, '--advertise-client-urls', urls.clientUrl,
      '--listen-peer-urls', urls.peerUrl, '--initial-advertise-peer-urls', urls.peerUrl,
      '--initial-cluster', initialCluster, '--initial-cluster-state', state,
      '--cert-file', files.cert, '--key-file', files.key, '--trusted-ca-file', files.ca, '--client-cert-auth',
      '--peer-cert-file', files.cert, '--peer-key-file', files.key, '--peer-trusted-ca-file', files.ca, '--peer-client-cert-auth',
      '--heartbeat-interval', String(HEARTBEAT_MS), '--election-timeout', String(ELECTION_MS),
      // etcd's strict check refuses any member add until every voter has been connected for 5 s, which made
      // a join right after another wait that long. Corral adds only learners (no quorum change), promotion
      // still needs a caught-up learner, and removing a voter checks the quorum itself (decision 0062).
      '--strict-reconfig-check=false',
      // A bootstrap copies a whole store in large txns; plugin transactions may touch many documents.
      '--max-txn-ops', '10000', '--max-request-bytes', String(16 * 1024 * 1024),
      '--auto-compaction-mode', 'periodic', '--auto-compaction-retention', '1h',
      '--logger', 'zap', '--log-outputs', 'stderr', '--log-level', 'warn',
    ];
  }

  /** Start etcd and wait until it answers; on failure it is stopped again and the error says why. */
  async start(tls: EtcdTls): Promise<void> {
    this.stopping = false;
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    this.spawn();
    try {
      await this.waitReady(tls);
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  private spawn(): void {
    this.logStream ??= createWriteStream(path.join(this.dir, 'etcd.log'), { flags: 'a' });
    const proc = this.hostTools.spawn('etcd', this.args(), { endWithDaemon: true });
    this.proc = proc;
    proc.stdout.pipe(this.logStream, { end: false });
    proc.stderr?.pipe(this.logStream, { end: false });
    this.log.info({ pid: proc.pid, name: this.config.urls.name, client: this.config.urls.clientUrl }, 'etcd member started');
    void proc.exited.then((code) => {
      if (this.proc !== proc) return;
      this.proc = undefined;
      if (this.stopping) return;
      this.log.warn({ code }, 'etcd member exited');
      this.scheduleRestart();
    });
  }

  private scheduleRestart(): void {
    const now = Date.now();
    this.restarts = this.restarts.filter((t) => now - t < 60_000);
    if (this.restarts.length >= MAX_RESTARTS_PER_MINUTE) {
      const reason = `etcd exited ${this.restarts.length} times within a minute; see ${path.join(this.dir, 'etcd.log')}`;
      this.log.error(reason);
      this.onGiveUp?.(reason);
      return;
    }
    const delay = Math.min(5_000, 200 * 2 ** this.restarts.length);
    this.restarts.push(now);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (this.stopping) return;
      this.spawn();
      this.onRestart?.();
    }, delay);
  }

  /** Polls the member's status until it knows a leader (or, joining as a learner, until it answers). */
  private async waitReady(tls: EtcdTls): Promise<void> {
    const deadline = Date.now() + START_BOUND_MS;
    // gRPC waits about a second before dialling again after a refused connection: dial only once etcd listens.
    await this.waitListening(deadline);
    const client = new Etcd3({
      hosts: [this.config.urls.clientUrl],
      credentials: { rootCertificate: Buffer.from(tls.ca), certChain: Buffer.from(tls.cert), privateKey: Buffer.from(tls.key) },
      faultHandling: { host: () => noop, global: noop },
    });
    let last = 'no answer';
    try {
      while (Date.now() < deadline) {
        if (!this.proc) throw new Error(`etcd exited at start${await this.lastError()}; see ${path.join(this.dir, 'etcd.log')}`);
        try {
          const status = await client.maintenance.status({ deadline: Date.now() + 1_000 });
          if (status.leader && status.leader !== '0') return;
          last = 'no leader yet';
        } catch (err) {
          last = (err as Error).message;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`etcd did not become ready within ${START_BOUND_MS / 1000} s (${last})`);
    } finally {
      client.close();
    }
  }

  /** Polls etcd's client port with plain TCP connects until it accepts one (or etcd exited, or the deadline). */
  private async waitListening(deadline: number): Promise<void> {
    const url = new URL(this.config.urls.clientUrl);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = Number(url.port);
    while (Date.now() < deadline && this.proc) {
      const open = await new Promise<boolean>((resolve) => {
        const socket = connect({ host, port });
        const done = (ok: boolean) => {
          socket.destroy();
          resolve(ok);
        };
        socket.once('connect', () => done(true));
        socket.once('error', () => done(false));
        socket.setTimeout(500, () => done(false));
      });
      if (open) return;
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** The last error etcd logged (its zap JSON lines), as ": <msg> (<error>)", or nothing. */
  private async lastError(): Promise<string> {
    // Let the log stream take what etcd wrote before it exited.
    await new Promise((r) => setTimeout(r, 50));
    const text = await readFile(path.join(this.dir, 'etcd.log'), 'utf8').catch(() => '');
    for (const line of text.trim().split('\n').reverse().slice(0, 50)) {
      try {
        const entry = JSON.parse(line) as { level?: string; msg?: string; error?: string };
        if (entry.level && /error|fatal|panic/.test(entry.level)) return `: ${entry.msg ?? ''}${entry.error ? ` (${entry.error})` : ''}`;
      } catch { /* not a JSON line */ }
    }
    return '';
  }

  /** Stop supervision and etcd: SIGTERM, then SIGKILL after a bound. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    const proc = this.proc;
    if (proc) {
      proc.kill('SIGTERM');
      const killed = await Promise.race([proc.exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), STOP_BOUND_MS))]);
      if (!killed) {
        proc.kill('SIGKILL');
        await proc.exited;
      }
    }
    this.proc = undefined;
    await new Promise<void>((resolve) => (this.logStream ? this.logStream.end(resolve) : resolve()));
    this.logStream = undefined;
  }

  /** Stop and delete the member's data and files. */
  async wipe(): Promise<void> {
    await this.stop();
    await rm(this.dir, { recursive: true, force: true });
  }
}
