/**
 * The kernel's cluster traffic in one place: the pooled connections to members, forwarding of
 * requests and websockets for the pipeline, members asking each other (`ClusterView.request`),
 * other members' operations, and their events relayed to this member's listeners.
 */
import type Logger from 'bunyan';
import type { EventHub } from '../events/hub.js';
import type { Forwarding } from '../http/pipeline.js';
import type { ServerCertificate } from '../tls/server-certificate.js';
import type { KernelClusterView } from './cluster-view.js';
import { forwardTarget } from './forward-target.js';
import { Forwarder } from './forwarder.js';
import { MemberEvents } from './member-events.js';
import { OperationOwners } from './operation-owners.js';
import { PeerAgents } from './peer-agents.js';

export class ClusterTraffic {
  readonly forwarder: Forwarder;
  readonly owners: OperationOwners;
  readonly memberEvents: MemberEvents;
  /** What the route pipeline and websocket upgrades ask before a handler runs. */
  readonly forwarding: Forwarding;
  private readonly agents: PeerAgents;
  private readonly unsubscribe: () => void;

  constructor(private readonly view: KernelClusterView, events: EventHub, private readonly certificate: () => ServerCertificate | undefined, log: Logger) {
    const clusterLog = log.child({ component: 'cluster' });
    this.agents = new PeerAgents(certificate);
    this.forwarder = new Forwarder(this.agents, () => view.serverName, clusterLog);
    this.owners = new OperationOwners(view, this.forwarder, clusterLog);
    this.forwarder.onOperation = (id, member) => this.owners.remember(id, member);
    this.memberEvents = new MemberEvents(view, events, this.forwarder, clusterLog);
    view.sender = (member, method, path, body) => this.forwarder.request(member, method, path, body);
    view.downloader = (member, path, file) => this.forwarder.download(member, path, file);
    this.forwarding = {
      active: () => view.enabled,
      target: (locate, req) => forwardTarget(view, locate, req),
      proxy: (member, raw, body, res, caller) => this.forwarder.proxy(member, raw, body, res, caller),
      openWebsocket: (member, raw, caller) => this.forwarder.openWebsocket(member, raw, caller),
    };
    // Connections to members that left are closed; what was under way with an offline member ends now.
    this.unsubscribe = view.onChange(() => {
      this.agents.retain(view.members());
      this.forwarder.dropUnavailable(view.enabled ? view.members() : []);
    });
  }

  /** A TLS client presenting the cluster certificate is another member (only while clustered). */
  isPeer(fingerprint: string): boolean {
    return this.view.enabled && fingerprint === this.certificate()?.fingerprint;
  }

  /** Once the listeners serve: links to the other members' events follow the membership from now on. */
  start(): void {
    this.memberEvents.start();
  }

  stop(): void {
    this.unsubscribe();
    this.memberEvents.stop();
    this.agents.close();
  }
}
