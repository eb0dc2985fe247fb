/**
 * Connection lifetimes on a listener. Node closes a keep-alive connection after 5 s of idleness, and
 * a client that reuses it at that moment (Python's http.client, as Ansible's lxd modules use it) sends
 * its request into a closing socket and reports that it cannot connect. The reference (Go's net/http)
 * keeps idle connections open; so does corral, within a generous bound. hapi's stop ends idle
 * connections and destroys the rest after its timeout, so shutdown does not wait for them.
 */
import type { Server } from 'node:http';

/** An idle keep-alive connection is closed after this long (the advertised Keep-Alive timeout). */
export const IDLE_CONNECTION_MS = 10 * 60 * 1000;
/** The request line and headers must arrive within this long. */
export const HEADERS_TIMEOUT_MS = 60 * 1000;

export function keepConnectionsOpen(listener: Server): void {
  listener.keepAliveTimeout = IDLE_CONNECTION_MS;
  listener.headersTimeout = HEADERS_TIMEOUT_MS;
  // Bodies have their own bounds (request-body.ts) and uploads of large images take longer than
  // node's default of 5 minutes for a whole request.
  listener.requestTimeout = 0;
}
