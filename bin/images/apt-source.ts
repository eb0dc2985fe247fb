/**
 * The Debian mirror this host installs its own packages from: the first `deb` source (deb822
 * .sources files or one-line sources.list entries) that is not the security archive.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export const FALLBACK_MIRROR = 'http://deb.debian.org/debian';

function deb822Uris(text: string): string[] {
  return text.split(/\n\s*\n/).flatMap((stanza) => {
    const field = (name: string) => stanza.match(new RegExp(`^${name}:\\s*(.+)$`, 'mi'))?.[1]?.trim() ?? '';
    if (!field('Types').split(/\s+/).includes('deb') || /^no$/i.test(field('Enabled'))) return [];
    return field('URIs').split(/\s+/).filter(Boolean);
  });
}

function oneLineUris(text: string): string[] {
  return text.split('\n').flatMap((line) => {
    const m = line.replace(/#.*/, '').trim().match(/^deb\s+(?:\[[^\]]*\]\s+)?(\S+)/);
    return m ? [m[1]!] : [];
  });
}

/** Mirrors named by the apt sources under `root` (/etc/apt), in apt's reading order. */
export function hostMirrors(aptDir = '/etc/apt'): string[] {
  const uris: string[] = [];
  const list = path.join(aptDir, 'sources.list');
  if (existsSync(list)) uris.push(...oneLineUris(readFileSync(list, 'utf8')));
  const parts = path.join(aptDir, 'sources.list.d');
  if (existsSync(parts)) {
    for (const name of readdirSync(parts).sort()) {
      const text = readFileSync(path.join(parts, name), 'utf8');
      if (name.endsWith('.sources')) uris.push(...deb822Uris(text));
      else if (name.endsWith('.list')) uris.push(...oneLineUris(text));
    }
  }
  return uris.filter((uri) => /^(https?|file):/.test(uri));
}

/** The host's Debian mirror, or Debian's own redirector when the host names none. */
export function hostDebianMirror(aptDir = '/etc/apt'): string {
  const mirrors = hostMirrors(aptDir).filter((uri) => !/security/.test(uri));
  return (mirrors.find((uri) => /\/debian\/?$/.test(uri)) ?? mirrors[0] ?? FALLBACK_MIRROR).replace(/\/$/, '');
}
