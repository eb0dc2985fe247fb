/** Events (part 6): one hub, three types, lifecycle events built by helpers for uniform payloads. */

export type EventType = 'operation' | 'logging' | 'lifecycle';

export interface Requestor {
  username: string;
  protocol: string;
  address: string;
}

export interface LifecycleMetadata {
  action: string;
  source: string;
  context?: Record<string, unknown>;
  requestor?: Requestor;
}

export interface EventEnvelope {
  type: EventType;
  timestamp: string;
  metadata: unknown;
  location: string;
  project?: string;
}

export interface EventsService {
  /** Send an event to every listener subscribed to its type and project (no project: server-wide, every listener). */
  emit(type: EventType, metadata: unknown, project?: string): void;
  /** Convenience for lifecycle events: `lifecycle('warning-deleted', '/1.0/warnings/x', requestor)`. */
  lifecycle(action: string, source: string, opts?: { project?: string; requestor?: Requestor; context?: Record<string, unknown> }): void;
  /** In-process listeners (plugins reacting to each other); returns an unsubscribe function. */
  subscribe(listener: (event: EventEnvelope) => void, types?: EventType[]): () => void;
}
