/**
 * The one events hub. An event is serialised once and written to every websocket listener whose
 * type and project filters admit it; in-process listeners get the object itself.
 */
import type { EventEnvelope, EventsService, EventType, Requestor } from '../../sdk/index.js';

export interface EventListener {
  types: ReadonlySet<EventType>;
  /** Undefined: every project. */
  project?: string;
  /** A restricted listener's projects: it gets their events only, and no server-wide ones. */
  restrictedTo?: readonly string[];
  /** Another member's link: it gets this member's own events only, never those relayed from others. */
  localOnly?: boolean;
  send(frame: string): void;
}

export const EVENT_TYPES: readonly EventType[] = ['operation', 'logging', 'lifecycle'];

export class EventHub implements EventsService {
  private readonly sockets = new Set<EventListener>();
  /** How many socket listeners want each type, so unwatched types cost nothing. */
  private readonly watchers: Record<EventType, number> = { operation: 0, logging: 0, lifecycle: 0 };
  /** The same for in-process listeners (a plugin following lifecycle events does not make progress updates cost). */
  private readonly internalWatchers: Record<EventType, number> = { operation: 0, logging: 0, lifecycle: 0 };
  private readonly internal = new Set<{ types?: ReadonlySet<EventType>; fn: (event: EventEnvelope) => void }>();

  /** `location` is read per event: a server that joins a cluster takes the member name. */
  constructor(private readonly location: () => string) {}

  /** `project` undefined: a server-wide event (logging), delivered to every listener and sent without a project. */
  emit(type: EventType, metadata: unknown, project?: string): void {
    if (!this.watched(type)) return;
    const event: EventEnvelope = { type, timestamp: new Date().toISOString(), metadata, location: this.location() };
    if (project !== undefined) event.project = project;
    for (const listener of this.internal) {
      if (!listener.types || listener.types.has(type)) listener.fn(event);
    }
    if (this.watchers[type] === 0) return;
    const frame = JSON.stringify(event);
    for (const socket of this.sockets) {
      if (socket.types.has(type) && admits(socket, project)) socket.send(frame);
    }
  }

  /**
   * An event another member emitted (its `location` kept), for this member's own listeners: in-process
   * subscribers and other members' links do not get it (each member hears every other one itself).
   */
  relay(frame: string, type: EventType, project: string | undefined): void {
    if (this.watchers[type] === 0) return;
    for (const socket of this.sockets) {
      if (!socket.localOnly && socket.types.has(type) && admits(socket, project)) socket.send(frame);
    }
  }

  lifecycle(action: string, source: string, opts: { project?: string; requestor?: Requestor; context?: Record<string, unknown> } = {}): void {
    const metadata: Record<string, unknown> = { action, source };
    if (opts.context) metadata.context = opts.context;
    if (opts.requestor) metadata.requestor = opts.requestor;
    this.emit('lifecycle', metadata, opts.project ?? 'default');
  }

  subscribe(fn: (event: EventEnvelope) => void, types?: EventType[]): () => void {
    const entry = { types: types && new Set(types), fn };
    this.internal.add(entry);
    const counted = [...(entry.types ?? EVENT_TYPES)];
    for (const type of counted) this.internalWatchers[type]++;
    return () => {
      if (!this.internal.delete(entry)) return;
      for (const type of counted) this.internalWatchers[type]--;
    };
  }

  /** A websocket listener; returns the function that removes it. */
  attach(listener: EventListener): () => void {
    this.sockets.add(listener);
    for (const type of listener.types) this.watchers[type]++;
    return () => {
      if (!this.sockets.delete(listener)) return;
      for (const type of listener.types) this.watchers[type]--;
    };
  }

  /** Whether anybody listens to a type (the logging feed checks this before building events). */
  watched(type: EventType): boolean {
    return this.watchers[type] > 0 || this.internalWatchers[type] > 0;
  }
}

function admits(listener: EventListener, project: string | undefined): boolean {
  if (listener.restrictedTo) return project !== undefined && listener.restrictedTo.includes(project) && (listener.project === undefined || listener.project === project);
  return listener.project === undefined || project === undefined || listener.project === project;
}
