/**
 * The cluster's members as this member sees them: the records in the cluster store, who is online
 * (Health), the database roles (etcd), published to the kernel on every change so that forwarding and
 * `ctx.cluster.members()` follow. While this member's etcd leads, it also promotes learners.
 */
import type Logger from 'bunyan';
import { unavailable, type ClusterControl, type ClusterView, type Collection, type EtcdMemberStatus, type ServerConfig } from '../../sdk/index.js';
import { AbandonedJoins } from './abandoned.js';
import { Health } from './health.js';
import { clusterSizing } from './keys.js';
import { DatabaseRole, groupsOf, type MemberRecord, type MemberView } from './member.js';
import { oneMembershipChange } from './membership-lock.js';
import { databaseRoles, promoteLearners, voterToDemote } from './roles.js';

export const MEMBERS_COLLECTION = 'members';
/** How often the leader looks for learners to promote (a join also triggers a round at once). */
const REBALANCE_INTERVAL_MS = 1000;
/** How long more voters than wanted must last before one is demoted. */
const DEMOTE_AFTER_MS = 5000;
/** Bound on one etcd membership query; past it roles are shown as last known. */
const ETCD_QUERY_MS = 500;

export class Membership {
  readonly health: Health;
  private lastEtcd: EtcdMemberStatus[] = [];
  private rebalanceTimer: NodeJS.Timeout | undefined;
  private rebalancing = false;
  private published = '';
  private readonly abandoned: AbandonedJoins;
  /** Since when the rounds have seen more voters than wanted. */
  private surplusSince: number | undefined;
  /** Ask a member to demote its database member (set by the plugin: a peer request). */
  demote: ((member: MemberRecord) => Promise<void>) | undefined;

  constructor(
    readonly records: Collection<MemberRecord>,
    private readonly cluster: ClusterView,
    private readonly config: ServerConfig,
    private readonly control: () => ClusterControl | undefined,
    private readonly log: Logger,
  ) {
    this.abandoned = new AbandonedJoins(records, log);
    // A member coming online may be a learner to promote: no need to wait for the next round.
    this.health = new Health(() => {
      void this.publish();
      void this.rebalance();
    });
  }

  async list(): Promise<MemberRecord[]> {
    // The key is the name (a record moved by a rename keeps its key authoritative).
    return (await this.records.list('')).map((r) => ({ ...r.doc, name: r.name }));
  }

  async get(name: string): Promise<{ doc: MemberRecord; rev: number } | undefined> {
    const found = await this.records.get('', name);
    return found ? { doc: { ...found.doc, name: found.name }, rev: found.rev } : undefined;
  }

  /** The etcd membership, bounded; the last answer when etcd cannot say now (no quorum). */
  async etcdMembers(): Promise<EtcdMemberStatus[]> {
    const control = this.control();
    if (!control) return [];
    let timer: NodeJS.Timeout | undefined;
    try {
      this.lastEtcd = await Promise.race([
        control.etcdMembers(),
        new Promise<never>((_, reject) => { timer = setTimeout(() => reject(unavailable('etcd did not answer')), ETCD_QUERY_MS); }),
      ]);
    } catch (err) {
      this.log.debug({ err }, 'etcd membership unavailable; using the last one known');
    } finally {
      clearTimeout(timer);
    }
    return this.lastEtcd;
  }

  async views(): Promise<MemberView[]> {
    const records = await this.list();
    const roles = databaseRoles(records, await this.etcdMembers(), clusterSizing(this.config).maxStandby);
    return records.map((r) => this.render(r, roles.get(r.name) ?? []));
  }

  async view(name: string): Promise<MemberView | undefined> {
    return (await this.views()).find((v) => v.server_name === name);
  }

  private render(record: MemberRecord, database: string[]): MemberView {
    const health = this.health.of(record.name);
    const online = health.online || (!this.health.running && record.name === this.cluster.serverName);
    return {
      roles: [...database, ...record.roles],
      failure_domain: record.failure_domain || 'default',
      description: record.description,
      config: record.config,
      groups: groupsOf(record),
      server_name: record.name,
      url: `https://${record.address}`,
      database: database.includes(DatabaseRole.voter),
      status: !online ? 'Offline' : record.state === 'evacuated' ? 'Evacuated' : 'Online',
      message: online ? (record.state === 'evacuated' ? 'Unavailable due to maintenance' : 'Fully operational') : health.message,
      architecture: record.architecture,
    };
  }

  /** Tell the kernel who is where and who is online (only when that changed). */
  async publish(): Promise<void> {
    const control = this.control();
    if (!control || !this.cluster.enabled) return;
    let records: MemberRecord[];
    try {
      records = await this.list();
    } catch (err) {
      this.log.warn({ err }, 'could not read the cluster members to publish them');
      return;
    }
    const members = records.map((r) => ({
      name: r.name,
      address: r.address,
      online: this.health.isOnline(r.name) || (!this.health.running && r.name === this.cluster.serverName),
      // Placement passes over an evacuated member, one that takes instances only by name (`manual`), and one
      // that takes them only through its groups (`group`, placed by `?target=@<group>`).
      placeable: r.state !== 'evacuated' && (r.config?.['scheduler.instance'] ?? 'all') === 'all',
      placeableInGroup: r.state !== 'evacuated' && r.config?.['scheduler.instance'] !== 'manual',
    }));
    const text = JSON.stringify(members);
    if (text === this.published) return;
    this.published = text;
    control.publishMembers(members);
  }

  /** Start holding this member's lease, watching everybody's, and the leader's promotion rounds. */
  async start(name: string): Promise<void> {
    const control = this.control();
    if (!control) return;
    await this.health.start(control, name, clusterSizing(this.config).offlineThreshold);
    this.published = '';
    await this.publish();
    this.rebalanceTimer ??= setInterval(() => void this.rebalance(), REBALANCE_INTERVAL_MS);
    this.rebalanceTimer.unref();
  }

  async stop(): Promise<void> {
    if (this.rebalanceTimer) clearInterval(this.rebalanceTimer);
    this.rebalanceTimer = undefined;
    await this.health.stop();
    this.published = '';
  }

  /** One round on the etcd leader's member: take out abandoned joins, promote caught-up learners while voters are missing. */
  async rebalance(): Promise<void> {
    const control = this.control();
    if (!control || !this.cluster.enabled || this.rebalancing) return;
    this.rebalancing = true;
    try {
      const etcd = await this.etcdMembers();
      const records = await this.list();
      const me = records.find((r) => r.name === this.cluster.serverName);
      const leader = etcd.find((e) => e.leader);
      if (!me || !leader || !(leader.name === me.name || new URL(leader.peerUrl).hostname === new URL(`https://${me.address}`).hostname)) return;
      const isOnline = (n: string) => this.health.isOnline(n);
      const dropped = await this.abandoned.sweep(control, records, etcd, isOnline);
      if (dropped.length) return;
      const promoted = await promoteLearners(control, records, etcd, clusterSizing(this.config).maxVoters, isOnline);
      if (promoted.length) this.log.info({ promoted }, 'learners promoted to etcd voters');
      const demote = promoted.length ? undefined : voterToDemote(records, etcd, clusterSizing(this.config).maxVoters, me.name, isOnline);
      // A surplus must last: a join promotes the standby just before it adds the joiner as the next one.
      if (!demote) this.surplusSince = undefined;
      else this.surplusSince ??= Date.now();
      if (demote && this.demote && Date.now() - this.surplusSince! >= DEMOTE_AFTER_MS) {
        this.surplusSince = undefined;
        const ask = this.demote;
        // Not while a join or a removal is under way (no wait: a later round decides again).
        await oneMembershipChange(control, `demoting member ${demote}`, async () => {
          // A join may have added its learner since this round read etcd: decided again under the lock.
          if (voterToDemote(await this.list(), await control.etcdMembers(), clusterSizing(this.config).maxVoters, me.name, isOnline) !== demote) return;
          this.log.info({ member: demote }, 'more database voters than wanted: demoting one to standby');
          await ask(records.find((r) => r.name === demote)!);
        }, 0).catch((err: Error) => this.log.warn({ err, member: demote }, 'demotion failed; the next rounds try again'));
      }
    } catch (err) {
      this.log.debug({ err }, 'promotion round failed');
    } finally {
      this.rebalancing = false;
    }
  }
}


