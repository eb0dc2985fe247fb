/**
 * Events of every member on every member's `/1.0/events`: this member keeps one websocket to each
 * other online member's events endpoint, asking for that member's own events only, and relays what
 * arrives to its own listeners with the sender's `location`. Nothing relayed is sent on again, so
 * events never go round. Links follow the membership, and a lost link is made again with backoff.
 */
import type Logger from 'bunyan';
import type WebSocket from 'ws';
import type { ClusterMemberInfo, EventType } from '../../sdk/index.js';
import type { EventHub } from '../events/hub.js';
import type { KernelClusterView } from './cluster-view.js';
import type { Forwarder } from './forwarder.js';
import { LOCAL_EVENTS_HEADER } from './peer-headers.js';

const FIRST_RETRY_MS = 250;
const LAST_RETRY_MS = 10_000;
/** The events endpoint pings every 10 s: a link that heard nothing for this long is dead and is made again. */
const SILENCE_MS = 25_000;
const EVENTS_PATH = '/1.0/events?all-projects=true';

class MemberLink {
  private ws: WebSocket | undefined;
  private retry: NodeJS.Timeout | undefined;
  private silence: NodeJS.Timeout | undefined;
  private delay = FIRST_RETRY_MS;
  private closed = false;

  constructor(readonly member: ClusterMemberInfo, private readonly forwarder: Forwarder, private readonly hub: EventHub, private readonly log: Logger) {
    this.connect();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retry);
    clearTimeout(this.silence);
    this.ws?.terminate();
  }

  private connect(): void {
    this.forwarder.peerWebsocket(this.member, EVENTS_PATH, { [LOCAL_EVENTS_HEADER]: '1' }).then((ws) => {
      if (this.closed) return ws.terminate();
      this.ws = ws;
      this.delay = FIRST_RETRY_MS;
      this.log.debug({ member: this.member.name }, 'listening to a member\'s events');
      this.heard();
      ws.on('ping', () => this.heard());
      ws.on('message', (data) => {
        this.heard();
        this.relay(String(data));
      });
      ws.on('close', () => this.lost());
      ws.on('error', () => ws.terminate());
      ws.resume();
    }, (err: Error) => {
      this.log.debug({ member: this.member.name, err: err.message }, 'cannot listen to a member\'s events yet');
      this.lost();
    });
  }

  private relay(frame: string): void {
    let event: { type?: unknown; project?: unknown };
    try {
      event = JSON.parse(frame) as typeof event;
    } catch {
      return;
    }
    if (typeof event.type !== 'string') return;
    this.hub.relay(frame, event.type as EventType, typeof event.project === 'string' ? event.project : undefined);
  }

  private heard(): void {
    clearTimeout(this.silence);
    this.silence = setTimeout(() => this.ws?.terminate(), SILENCE_MS).unref();
  }

  private lost(): void {
    clearTimeout(this.silence);
    this.ws = undefined;
    if (this.closed) return;
    this.retry = setTimeout(() => this.connect(), this.delay).unref();
    this.delay = Math.min(this.delay * 2, LAST_RETRY_MS);
  }
}

export class MemberEvents {
  private readonly links = new Map<string, MemberLink>();
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly view: KernelClusterView, private readonly hub: EventHub, private readonly forwarder: Forwarder, private readonly log: Logger) {}

  start(): void {
    this.unsubscribe ??= this.view.onChange(() => this.sync());
    this.sync();
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    for (const link of this.links.values()) link.close();
    this.links.clear();
  }

  /** Members this member hears from now (for tests and diagnostics). */
  linked(): string[] {
    return [...this.links.keys()];
  }

  private sync(): void {
    const wanted = this.view.enabled ? this.view.members().filter((m) => m.online && m.name !== this.view.serverName) : [];
    const byName = new Map(wanted.map((m) => [m.name, m]));
    for (const [name, link] of this.links) {
      const member = byName.get(name);
      if (member && member.address === link.member.address) continue;
      link.close();
      this.links.delete(name);
    }
    for (const member of wanted) {
      if (!this.links.has(member.name)) this.links.set(member.name, new MemberLink(member, this.forwarder, this.hub, this.log));
    }
  }
}
