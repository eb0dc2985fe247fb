/**
 * The UI's Content-Security-Policy: scripts, styles and connections from this origin only, nothing
 * framed, no inline code except the page's import map, allowed by its hash.
 */
import { createHash } from 'node:crypto';

const IMPORT_MAP = /<script type="importmap">([\s\S]*?)<\/script>/;

export function contentSecurityPolicy(indexHtml: string): string {
  const importMap = IMPORT_MAP.exec(indexHtml)?.[1];
  const scripts = ["'self'"];
  if (importMap !== undefined) scripts.push(`'sha256-${createHash('sha256').update(importMap).digest('base64')}'`);
  return [
    "default-src 'none'",
    `script-src ${scripts.join(' ')}`,
    "style-src 'self'",
    "img-src 'self'",
    // The API and its events websocket, on this same host and port.
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}
