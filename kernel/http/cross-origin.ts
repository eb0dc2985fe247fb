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

/**
 * The origin names this server's host and port. Its scheme is not compared: a page cannot be served
 * over http from the port this listener holds, and some websocket clients always say http.
 */
function sameHost(origin: string, host: string | undefined): boolean {
  if (!host) return false;
  try {
    const from = new URL(origin);
    if (from.protocol !== 'https:' && from.protocol !== 'http:') return false;
    const to = new URL(`https://${host}`);
    const port = (u: URL) => u.port || '443';
    return from.hostname === to.hostname && (from.port || (from.protocol === 'http:' ? '80' : '443')) === port(to);
  } catch {
    return false;
  }
}
