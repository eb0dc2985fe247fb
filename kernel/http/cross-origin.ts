/**
 * Cross-site request forgery guard. A browser holding a trusted client certificate presents it to
 * this server whatever page asks, and the API reads any body as JSON: a page elsewhere could change
 * things with a form-like POST, or read events through a websocket. Browsers name the page's origin in
 * `Origin` (every websocket and every non-GET fetch); the API's own clients send none, or their own host.
 * So a request whose Origin is another site is refused, unless `core.https_allowed_origin` names it.
 */
import type { IncomingHttpHeaders } from 'node:http';

/** Why the request is refused, or undefined when it may go on. */
export function crossOriginRefusal(headers: IncomingHttpHeaders, allowedOrigin: string): string | undefined {
  const origin = headers.origin;
  if (origin === undefined) return undefined;
  if (allowedOrigin === '*' || (allowedOrigin !== '' && origin === allowedOrigin)) return undefined;
  if (sameHost(origin, headers.host)) return undefined;
  return `Refused a browser request from another site (${origin.slice(0, 200)}); core.https_allowed_origin can allow one origin`;
}

/** Ports that an origin leaves out, by scheme: websocket clients name theirs with ws: or wss:. */
const DEFAULT_PORTS: Record<string, string> = { 'https:': '443', 'wss:': '443', 'http:': '80', 'ws:': '80' };

/**
 * The origin names this server's host and port. Its scheme is not compared: a page cannot be served
 * over plain http from the port this listener holds, and websocket clients say http, ws or wss.
 */
function sameHost(origin: string, host: string | undefined): boolean {
  if (!host) return false;
  try {
    const from = new URL(origin);
    const fromPort = from.port || DEFAULT_PORTS[from.protocol];
    if (fromPort === undefined) return false;
    const to = new URL(`https://${host}`);
    return from.hostname === to.hostname && fromPort === (to.port || '443');
  } catch {
    return false;
  }
}
