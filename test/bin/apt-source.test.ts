/** The Debian mirror image:debian takes by default: the one the host's apt sources name. */
import test from 'ava';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FALLBACK_MIRROR, hostDebianMirror, hostMirrors } from '../../bin/images/apt-source.js';

function aptDir(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-apt-'));
  mkdirSync(path.join(dir, 'sources.list.d'));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}

test('deb822 sources: the first enabled deb stanza that is not the security archive', (t) => {
  const dir = aptDir({
    'sources.list.d/debian.sources': [
      'Types: deb-src\nURIs: http://src.example.invalid/debian\nSuites: bookworm\nComponents: main\n',
      'Types: deb\nURIs: http://mirror.example.invalid/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n',
      'Types: deb\nURIs: http://mirror.example.invalid/debian-security\nSuites: bookworm-security\nComponents: main\n',
    ].join('\n'),
    'sources.list.d/other.sources': 'Types: deb\nEnabled: no\nURIs: http://off.example.invalid/debian\nSuites: bookworm\n',
  });
  try {
    t.deepEqual(hostMirrors(dir), ['http://mirror.example.invalid/debian/', 'http://mirror.example.invalid/debian-security']);
    t.is(hostDebianMirror(dir), 'http://mirror.example.invalid/debian');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('one-line sources.list, options and comments; no source at all falls back to Debian\'s redirector', (t) => {
  const dir = aptDir({ 'sources.list': '# deb http://commented.example.invalid/debian bookworm main\ndeb [arch=amd64 signed-by=/k.gpg] http://one.example.invalid/debian bookworm main\n' });
  const empty = aptDir({});
  try {
    t.is(hostDebianMirror(dir), 'http://one.example.invalid/debian');
    t.is(hostDebianMirror(empty), FALLBACK_MIRROR);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(empty, { recursive: true, force: true });
  }
});
