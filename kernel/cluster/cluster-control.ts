/**
 * The kernel's ClusterControl (sdk/cluster.ts), driven by the clustering plugin: the etcd member beside
 * the daemon, the store's switch between sqlite and etcd, this server's identity, leases for health.
 * Every multi-step change undoes what it did when a step fails.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import type Logger from 'bunyan';
import type { Lease, Watcher } from 'etcd3';
import {
  type ClusterJoinInfo, type MemberConfigEntry,
  conflict, unavailable, type ClusterControl, type ClusterMemberInfo, type EtcdAuthority, type EtcdMemberStatus, type EtcdMemberUrls, type EtcdTls, type HostTools,
} from '../../sdk/index.js';
import { DocumentStore } from '../store/document-store.js';
import { EtcdBackend } from '../store/etcd-backend.js';
import { SqliteBackend } from '../store/sqlite-backend.js';
import { prefixEnd } from '../store/etcd-keys.js';
import type { KernelClusterView } from './cluster-view.js';
import { STANDALONE_NAME } from './cluster-view.js';
import { EtcdConnection } from './etcd-client.js';
import { EtcdMember, ETCD_CLIENT_PORT, etcdUrls } from './etcd-member.js';
import { hostOf, issueEtcdMember, newEtcdAuthority, sameKeyPair } from './etcd-pki.js';
import { etcdDir, readClusterState, removeClusterState, writeClusterState } from './cluster-state.js';

const LEASE_PREFIX = '/corral/lease/';
const LOCK_PREFIX = '/corral/lock/';
/** A lock's lease: kept alive while held, so only a holder that died lets it lapse (after this long). */
const LOCK_TTL_SECONDS = 10;
/** How long a caller waits for a held lock by default. */
const LOCK_WAIT_MS = 30_000;
/** Heartbeat writes outstanding at once (each is bounded by the call bound). */
const MAX_BEATS_IN_FLIGHT = 8;
/** etcd refuses some membership changes for a while (a learner catching up, members connected too recently). */
const MEMBERSHIP_BOUND_MS = 10_000;

export interface ClusterControlDeps {
  dataDir: string;
  /** The sqlite file a standalone server uses (':memory:' in test kernels). */
  storeFile: string;
  hostTools: HostTools;
  log: Logger;
  view: KernelClusterView;
  store: () => DocumentStore;
  /** Serve with a new certificate (written to the data dir; every HTTPS listener switches). */
  replaceCertificate: (cert: string, key: string) => Promise<void>;
  certificate: () => { cert: string; key: string } | undefined;
  /** The kernel hooks families tap: member-specific keys for joiners, and their parts made once on etcd. */
  hooks?: {
    memberConfigKeys: { promise(entries: MemberConfigEntry[]): Promise<MemberConfigEntry[]> };
    clusterJoined: { promise(info: ClusterJoinInfo): Promise<void> };
  };
}

interface Running {
  member: EtcdMember;
  conn: EtcdConnection;
  urls: EtcdMemberUrls;
}

export class KernelClusterControl implements ClusterControl {
  private running: Running | undefined;
  /** One reconfiguration at a time (bootstrap, join, leave). */
  private busy = false;
  /** Leases this member keeps alive, stopped at shutdown (they then lapse after their TTL). */
  private readonly leases = new Set<{ stop(): void }>();

  constructor(private readonly deps: ClusterControlDeps) {}

  /** At boot, before plugins register: a member that was clustered starts etcd and opens the store on it. */
  async resume(): Promise<DocumentStore | undefined> {
    const state = await readClusterState(this.deps.dataDir);
    if (!state) return undefined;
    const dir = etcdDir(this.deps.dataDir);
    const tls = await readTls(dir);
    const member = this.member(state.etcd, state.etcd.initialCluster, state.etcd.state);
    await member.start(tls);
    let conn: EtcdConnection;
    try {
      conn = await EtcdConnection.open(state.etcd.clientUrl, otherClientUrls(state.etcd.initialCluster, state.etcd.name), tls);
    } catch (err) {
      await member.stop();
      throw err;
    }
    this.running = { member, conn, urls: state.etcd };
    this.deps.view.setIdentity(true, state.serverName);
    this.deps.log.info({ serverName: state.serverName }, 'clustered: the store is on etcd');
    return DocumentStore.over(new EtcdBackend(conn));
  }

  async prepare(): Promise<void> {
    // Loaded already: this module is the machinery.
  }

  etcdUrlsFor(name: string, address: string): EtcdMemberUrls {
    return etcdUrls(name, hostOf(address));
  }

  bootstrap(opts: { serverName: string; address: string }): Promise<void> {
    return this.reconfigure(async (undo) => {
      if (this.deps.view.enabled) throw conflict('This server is already clustered');
      const urls = this.etcdUrlsFor(opts.serverName, opts.address);
      const initialCluster = `${urls.name}=${urls.peerUrl}`;
      await this.startMember(urls, initialCluster, 'new', newEtcdAuthority(), undo);
      const previous = await this.deps.store().switchBackend(new EtcdBackend(this.running!.conn), 'copy');
      undo.push(async () => {
        await this.deps.store().switchBackend(previous, 'discard');
      });
      await writeClusterState(this.deps.dataDir, { serverName: opts.serverName, address: opts.address, etcd: { ...urls, initialCluster, state: 'new' } });
      // Families make their member parts under the new name, on etcd; a tap that throws reverts the step.
      this.deps.view.setIdentity(true, opts.serverName);
      undo.push(async () => this.deps.view.setIdentity(false, STANDALONE_NAME));
      await this.deps.hooks?.clusterJoined.promise({ serverName: opts.serverName, bootstrap: true, memberConfig: [] });
      // Past the last step that can fail: the sqlite copy is no longer this server's data.
      await previous.close().catch(() => undefined);
    });
  }

  async addEtcdMember(urls: EtcdMemberUrls, learner: boolean): Promise<{ initialCluster: string; memberId: string }> {
    const conn = this.conn();
    const res = await conn.call((c) => c.cluster.memberAdd({ peerURLs: [urls.peerUrl], isLearner: learner }));
    const initialCluster = res.members
      .map((m) => `${m.ID === res.member.ID ? urls.name : m.name}=${m.peerURLs[0]}`)
      .join(',');
    return { initialCluster, memberId: res.member.ID };
  }

  memberConfigKeys(): Promise<MemberConfigEntry[]> {
    return this.deps.hooks ? this.deps.hooks.memberConfigKeys.promise([]) : Promise.resolve([]);
  }

  async etcdAuthority(): Promise<EtcdAuthority> {
    this.conn();
    const files = EtcdMember.files(etcdDir(this.deps.dataDir));
    const cert = await readFile(files.ca, 'utf8').catch(() => undefined);
    const key = await readFile(files.caKey, 'utf8').catch(() => undefined)
      ?? (cert ? await this.adoptClusterKeyAuthority(cert, files.caKey) : undefined);
    if (!cert || !key) throw unavailable('This member cannot hand out the cluster database CA (its CA files are missing): ask another member');
    return { cert, key };
  }

  /**
   * A member of a cluster formed before the CA had a key of its own (decision 0062) holds a CA made with
   * the cluster key: while the cluster certificate is still that one, its key is the CA key, kept from now
   * on in the CA key file so that a later rotation of the cluster certificate leaves it alone.
   */
  private async adoptClusterKeyAuthority(caCert: string, caKeyFile: string): Promise<string | undefined> {
    const pair = this.certificate();
    if (!pair || !sameKeyPair(caCert, pair.key)) return undefined;
    await writeFile(caKeyFile, pair.key, { mode: 0o600 });
    return pair.key;
  }

  join(opts: { serverName: string; address: string; authority: EtcdAuthority; initialCluster: string; memberConfig: MemberConfigEntry[] }): Promise<void> {
    return this.reconfigure(async (undo) => {
      if (this.deps.view.enabled) throw conflict('This server is already clustered');
      const urls = this.etcdUrlsFor(opts.serverName, opts.address);
      await this.startMember(urls, opts.initialCluster, 'existing', opts.authority, undo);
      const previous = await this.deps.store().switchBackend(new EtcdBackend(this.running!.conn), 'discard');
      undo.push(async () => {
        await this.deps.store().switchBackend(previous, 'discard');
      });
      await writeClusterState(this.deps.dataDir, {
        serverName: opts.serverName, address: opts.address, etcd: { ...urls, initialCluster: opts.initialCluster, state: 'existing' },
      });
      this.deps.view.setIdentity(true, opts.serverName);
      undo.push(async () => this.deps.view.setIdentity(false, STANDALONE_NAME));
      await this.deps.hooks?.clusterJoined.promise({ serverName: opts.serverName, bootstrap: false, memberConfig: opts.memberConfig });
      await previous.close().catch(() => undefined);
    });
  }

  async promoteEtcdMember(memberId: string): Promise<void> {
    // etcd promotes only a learner that has caught up with the leader.
    await this.membershipChange('promote', /not in sync|learner/i, (c) => c.cluster.memberPromote({ ID: memberId }));
  }

  async checkRemoval(memberId: string): Promise<void> {
    await this.checkQuorumWithout(memberId);
  }

  async removeEtcdMember(memberId: string): Promise<void> {
    await this.checkQuorumWithout(memberId);
    await this.membershipChange('remove', /unhealthy cluster/i, (c) => c.cluster.memberRemove({ ID: memberId }));
  }

  /**
   * etcd runs without its strict reconfiguration check (etcd-member.ts), so this is the check: a voter is
   * removed only when a quorum of the voters left answers, or the cluster would stop there.
   */
  private async checkQuorumWithout(memberId: string): Promise<void> {
    const conn = this.conn();
    const list = await conn.call((c) => c.cluster.memberList({ linearizable: true } as never));
    const target = list.members.find((m) => m.ID === memberId);
    if (!target || target.isLearner) return;
    const remaining = list.members.filter((m) => !m.isLearner && m.ID !== memberId);
    const answering = (await Promise.all(remaining.map((m) => (m.clientURLs[0] ? conn.answers(m.clientURLs[0]) : false)))).filter(Boolean).length;
    const quorum = Math.floor(remaining.length / 2) + 1;
    if (answering < quorum) {
      throw unavailable(`Removing this database member would leave ${remaining.length} voting members of which only ${answering} answer: the cluster would lose its quorum`);
    }
  }

  /** A membership call, asked again while etcd answers `wait` (bounded); then a 503 that says why. */
  private async membershipChange(what: string, wait: RegExp, fn: (c: EtcdConnection['client']) => Promise<unknown>): Promise<void> {
    const conn = this.conn();
    const giveUp = Date.now() + MEMBERSHIP_BOUND_MS;
    // A learner catches up within tens of milliseconds on a LAN: ask again soon, then less often.
    let pause = 25;
    for (;;) {
      try {
        await conn.call(fn);
        return;
      } catch (err) {
        const message = (err as Error).message;
        if (!wait.test(message)) throw err;
        if (Date.now() > giveUp) throw unavailable(`The cluster database refused to ${what} the member: ${message.replace(/^.*etcdserver: /, '')}`);
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(200, pause * 2);
      }
    }
  }

  /**
   * Demote this member from voter to learner (decision 0062). etcd 3.4 has no demotion: the member is
   * removed (the voters left must answer as a quorum), its etcd stopped and its data wiped, then it is
   * added back as a learner and started again, syncing from the leader. Until it runs again, this daemon
   * reaches the database through another member. Refused before any change when it cannot work.
   */
  rejoinAsLearner(): Promise<void> {
    return this.reconfigure(async () => {
      const running = this.running;
      if (!running) throw unavailable('This server is not clustered: it has no cluster database');
      const { conn, urls } = running;
      const list = await conn.call((c) => c.cluster.memberList({ linearizable: true } as never));
      const self = ownEtcdMember(list.members, urls);
      if (!self) throw conflict('This member is not in the cluster database');
      if (self.isLearner) return;
      if (list.members.some((m) => m.isLearner)) throw conflict('etcd keeps one standby at most, and another member is one already');
      if (!list.members.some((m) => m.ID !== self.ID && !m.isLearner)) throw conflict('The only voting database member cannot be demoted');
      const tls = await readTls(etcdDir(this.deps.dataDir));
      await this.removeEtcdMember(self.ID);
      // Out of the database from here: etcd stops by itself once it sees its removal; supervision must not restart it.
      await running.member.stop();
      await rm(running.member.dataDir, { recursive: true, force: true });
      const added = await this.withinMembershipBound('add back', () => this.addEtcdMember(urls, true));
      const member = this.member(urls, added.initialCluster, 'existing');
      this.running = { member, conn, urls };
      await member.start(tls);
      const state = await readClusterState(this.deps.dataDir);
      if (state) await writeClusterState(this.deps.dataDir, { ...state, etcd: { ...urls, initialCluster: added.initialCluster, state: 'existing' } });
      this.deps.log.info({ member: urls.name }, 'demoted: this member\'s database member is a standby now');
    });
  }

  /**
   * A step asked again while the connection moves to another member (503s), or while a joiner's learner
   * holds etcd's one learner place until it is promoted; bounded.
   */
  private async withinMembershipBound<T>(what: string, step: () => Promise<T>): Promise<T> {
    const giveUp = Date.now() + MEMBERSHIP_BOUND_MS;
    for (;;) {
      try {
        return await step();
      } catch (err) {
        const passing = (err as { status?: number }).status === 503 || /too many learner/i.test((err as Error).message);
        if (!passing || Date.now() > giveUp) {
          throw unavailable(`The cluster database could not ${what} this member: ${(err as Error).message}`);
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  async etcdMembers(): Promise<EtcdMemberStatus[]> {
    const conn = this.conn();
    const [list, status] = await Promise.all([
      conn.call((c) => c.cluster.memberList({ linearizable: true } as never)),
      conn.call((c) => c.maintenance.status()),
    ]);
    return list.members.map((m) => ({
      id: m.ID, name: m.name, peerUrl: m.peerURLs[0] ?? '', clientUrl: m.clientURLs[0] ?? '',
      learner: Boolean(m.isLearner), leader: m.ID === status.leader,
    }));
  }

  leave(): Promise<void> {
    return this.reconfigure(async () => {
      const running = this.running;
      if (!running) return;
      // What the cluster held, for telling listeners it is gone (unreadable when this member was removed first).
      const before = await this.deps.store().dumpBackend().catch(() => undefined);
      // Still a member of the database: take this member out, so the others keep their quorum count right.
      // Found by its peer URL, never by asking "who answers": once removed, its etcd stops and the
      // connection moves to another member, whose id that answer would be (and that member would go).
      const self = await running.conn.call((c) => c.cluster.memberList({ linearizable: true } as never))
        .then((list) => ownEtcdMember(list.members, running.urls)?.ID, () => undefined);
      if (self) await this.removeEtcdMember(self).catch((err: Error) => this.deps.log.warn({ err }, 'could not remove this member from the cluster database'));
      // A fresh standalone store: what this member held belongs to the cluster.
      if (this.deps.storeFile !== ':memory:') {
        for (const suffix of ['', '-wal', '-shm']) await rm(this.deps.storeFile + suffix, { force: true });
      }
      const fresh = await SqliteBackend.open(this.deps.storeFile);
      const previous = await this.deps.store().switchBackend(fresh, 'discard', before ?? { docs: [], versions: new Map() });
      await previous.close().catch(() => undefined);
      for (const lease of this.leases) lease.stop();
      this.leases.clear();
      await this.stopMember(true);
      await removeClusterState(this.deps.dataDir);
      this.deps.view.setMembers([]);
      this.deps.view.setIdentity(false, STANDALONE_NAME);
    });
  }

  async replaceCertificate(cert: string, key: string): Promise<void> {
    await this.deps.replaceCertificate(cert, key);
  }

  certificate(): { cert: string; key: string } | undefined {
    return this.deps.certificate();
  }

  rename(serverName: string): void {
    this.deps.view.setIdentity(this.deps.view.enabled, serverName);
    void readClusterState(this.deps.dataDir)
      .then((state) => state && writeClusterState(this.deps.dataDir, { ...state, serverName }))
      .catch((err: Error) => this.deps.log.error({ err }, 'could not record the new member name'));
  }

  publishMembers(members: ClusterMemberInfo[]): void {
    this.deps.view.setMembers(members);
  }

  async holdLease(key: string, value: string | (() => string), ttlSeconds: number, opts: { beatMs?: number } = {}): Promise<() => Promise<void>> {
    const conn = this.conn();
    const fullKey = LEASE_PREFIX + key;
    const valueOf = typeof value === 'function' ? value : () => value;
    let released = false;
    let lease: Lease | undefined;
    let beating = 0;
    // The heartbeat: the key written again under the current lease. A write sent before a leader died waits
    // out the call bound (3 s) at its etcd member; the next beats do not wait for it (watchers judge others
    // against their own beats, so every member's must resume right after an election). A failed beat is
    // skipped, and not taken as a lost quorum (the connection's probe judges that).
    const beatMs = opts.beatMs;
    const beat = beatMs ? setInterval(() => {
      const current = lease;
      if (beating >= MAX_BEATS_IN_FLIGHT || released || !current) return;
      beating += 1;
      void current.put(fullKey).value(valueOf()).exec()
        .catch(() => undefined)
        .finally(() => { beating -= 1; });
    }, beatMs) : undefined;
    beat?.unref();
    const grant = async (): Promise<void> => {
      const previous = lease;
      const next = conn.client.lease(ttlSeconds, { autoKeepAlive: true });
      lease = next;
      // A lease lost (the cluster unreachable longer than its TTL) is taken again once it answers.
      next.on('lost', () => {
        // A lost lease is let go here: etcd3 would otherwise keep trying to keep it alive (a ref'd timer).
        next.release();
        if (released || lease !== next) return;
        regrant();
      });
      try {
        await conn.call(() => next.put(fullKey).value(valueOf()).exec());
      } catch (err) {
        // A lease that never took its key is given up, or its keep-alive would run on forever.
        next.release();
        if (lease === next) lease = previous;
        // Released while this grant was under way: the previous lease would keep its keep-alive (a ref'd timer) forever.
        if (released) previous?.release();
        throw err;
      }
      // The key belongs to the new lease now: the previous one (kept alive through another member) is let go.
      if (previous && previous !== next) previous.release();
      if (released) next.release();
    };
    const regrant = () => {
      const retry = () => void grant().catch(() => {
        if (!released) setTimeout(retry, 500).unref();
      });
      retry();
    };
    // A lease is kept alive through the etcd member in use when it was granted; when the connection moves
    // (a standby promoted, or the member in use gone), the lease moves with it, or it would lapse with that member.
    const unfollow = conn.onSwitch(() => {
      if (!released) regrant();
    });
    const entry = {
      stop: () => {
        released = true;
        clearInterval(beat);
        unfollow();
        lease?.release();
      },
    };
    this.leases.add(entry);
    try {
      await grant();
    } catch (err) {
      entry.stop();
      this.leases.delete(entry);
      throw err;
    }
    return async () => {
      released = true;
      clearInterval(beat);
      unfollow();
      this.leases.delete(entry);
      await lease?.revoke().catch(() => undefined);
    };
  }

  /**
   * The lock is a key created only when absent (create revision 0), bound to a lease of this member's;
   * whoever finds it present reads its holder and tries again. etcd3's own Lock does the same but keeps
   * no value, and the holder's description is what a caller that gave up is told.
   */
  async exclusively<T>(name: string, holder: string, fn: () => Promise<T>, opts: { waitMs?: number } = {}): Promise<T> {
    const conn = this.conn();
    const key = LOCK_PREFIX + name;
    const giveUp = Date.now() + (opts.waitMs ?? LOCK_WAIT_MS);
    const lease = conn.client.lease(LOCK_TTL_SECONDS, { autoKeepAlive: true });
    // A lease whose keep-alive fails is let go, or etcd3 would try to keep it alive forever (a ref'd timer).
    lease.on('lost', () => lease.release());
    const letGo = () => conn.call(() => lease.revoke()).catch(() => lease.release());
    try {
      const id = await conn.call(() => lease.grant());
      let pause = 50;
      for (;;) {
        const res = await conn.call((c) => c.if(key, 'Create', '==', 0).then(c.put(key).value(holder).lease(id)).else(c.get(key)).commit());
        if (res.succeeded) break;
        const current = res.responses[0]?.response_range?.kvs?.[0]?.value?.toString() || 'another change';
        if (Date.now() + pause > giveUp) throw unavailable(`The cluster is busy with another change (${current}); try again`);
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(500, pause * 2);
      }
    } catch (err) {
      await letGo();
      throw err;
    }
    try {
      return await fn();
    } finally {
      await letGo();
    }
  }

  async watchLeases(prefix: string, listener: (held: ReadonlyMap<string, string>) => void): Promise<() => void> {
    const conn = this.conn();
    const fullPrefix = LEASE_PREFIX + prefix;
    const held = new Map<string, string>();
    const keyOf = (raw: Buffer) => raw.toString().slice(LEASE_PREFIX.length);
    let watcher: Watcher | undefined;
    let stopped = false;
    const load = async () => {
      const res = await conn.call((c) => c.kv.range({ key: Buffer.from(fullPrefix), range_end: prefixEnd(fullPrefix) }));
      held.clear();
      for (const kv of res.kvs) held.set(keyOf(kv.key), kv.value.toString());
      listener(new Map(held));
    };
    const watch = async () => {
      const w = await conn.watch((c) => c.watch().prefix(fullPrefix));
      if (stopped) return void w.cancel().catch(() => undefined);
      watcher = w;
      w.on('put', (kv) => {
        held.set(keyOf(kv.key), kv.value.toString());
        listener(new Map(held));
      });
      w.on('delete', (kv) => {
        held.delete(keyOf(kv.key));
        listener(new Map(held));
      });
      // After a reconnect the watch resumes where it was; reading again also covers a compacted gap.
      w.on('connected', () => void load().catch(() => undefined));
    };
    await watch();
    await load();
    // Another member in use: watch there, and read the whole set again.
    const unfollow = conn.onSwitch(() => {
      void watcher?.cancel().catch(() => undefined);
      watcher = undefined;
      const again = () => {
        if (stopped) return;
        watch().then(load).catch(() => setTimeout(again, 500).unref());
      };
      again();
    });
    return () => {
      stopped = true;
      unfollow();
      void watcher?.cancel().catch(() => undefined);
    };
  }

  /** Kernel shutdown: etcd stops after the store closed (its data stays for the next start). */
  async shutdown(): Promise<void> {
    for (const lease of this.leases) lease.stop();
    this.leases.clear();
    await this.stopMember(false);
  }

  /** The etcd member's process id (tests, diagnostics). */
  get etcdPid(): number | undefined {
    return this.running?.member.pid;
  }

  private conn(): EtcdConnection {
    if (!this.running) throw unavailable('This server is not clustered: it has no cluster database');
    return this.running.conn;
  }

  private member(urls: EtcdMemberUrls, initialCluster: string, state: 'new' | 'existing'): EtcdMember {
    const member = new EtcdMember(this.deps.hostTools, this.deps.log.child({ component: 'etcd' }), etcdDir(this.deps.dataDir), { urls, initialCluster, state });
    member.onGiveUp = (reason) => this.deps.log.error({ reason }, 'the cluster database member stays down');
    return member;
  }

  /** Fresh etcd files issued from the cluster database CA, then the member started; undone by stopping and wiping it. */
  private async startMember(urls: EtcdMemberUrls, initialCluster: string, state: 'new' | 'existing', authority: EtcdAuthority, undo: (() => Promise<void>)[]): Promise<void> {
    if (!(await this.deps.hostTools.which('etcd'))) throw unavailable('Clustering needs etcd, which is not installed on this server (Debian package etcd-server)');
    const dir = etcdDir(this.deps.dataDir);
    const tls = issueEtcdMember(authority, hostOf(urls.clientUrl.replace(/^https:\/\//, '')));
    await rm(dir, { recursive: true, force: true });
    await EtcdMember.writeTls(dir, tls, authority.key);
    const member = this.member(urls, initialCluster, state);
    undo.push(async () => {
      await this.stopMember(true);
    });
    this.running = { member, conn: undefined as unknown as EtcdConnection, urls };
    await member.start(tls);
    this.running.conn = await EtcdConnection.open(urls.clientUrl, otherClientUrls(initialCluster, urls.name), tls);
  }

  private async stopMember(wipe: boolean): Promise<void> {
    const running = this.running;
    this.running = undefined;
    running?.conn?.close();
    if (running) await (wipe ? running.member.wipe() : running.member.stop());
  }

  /** One reconfiguration at a time; on failure every recorded undo step runs, last first. */
  private async reconfigure(work: (undo: (() => Promise<void>)[]) => Promise<void>): Promise<void> {
    if (this.busy) throw conflict('Another cluster change is in progress');
    this.busy = true;
    const undo: (() => Promise<void>)[] = [];
    try {
      await work(undo);
    } catch (err) {
      for (const step of undo.reverse()) {
        await step().catch((e: Error) => this.deps.log.error({ err: e }, 'could not undo a step of a failed cluster change'));
      }
      throw err;
    } finally {
      this.busy = false;
    }
  }
}

/** This daemon's etcd member in a member list: the one advertising its peer URL. */
function ownEtcdMember<M extends { peerURLs: string[] }>(members: M[], urls: EtcdMemberUrls): M | undefined {
  return members.find((m) => m.peerURLs.includes(urls.peerUrl));
}

/** Client URLs of the other members of an etcd --initial-cluster value (every member serves clients on its peer host). */
function otherClientUrls(initialCluster: string, self: string): string[] {
  return initialCluster.split(',').map((entry) => entry.split('=')).filter(([name]) => name !== self)
    .map(([, peer]) => new URL(peer!)).map((u) => `https://${u.hostname}:${ETCD_CLIENT_PORT}`);
}

async function readTls(dir: string): Promise<EtcdTls> {
  const files = EtcdMember.files(dir);
  const [ca, cert, key] = await Promise.all([readFile(files.ca, 'utf8'), readFile(files.cert, 'utf8'), readFile(files.key, 'utf8')]);
  return { ca, cert, key };
}
