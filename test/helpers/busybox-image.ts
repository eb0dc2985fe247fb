/**
 * Builds the tiny busybox image the tests and the bench use (Debian busybox-static): a rootfs of
 * busybox and its applet links, an inittab, and metadata.yaml with a hostname template.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface BusyboxImage {
  /** Unified tarball (metadata.yaml + rootfs/ + templates/). */
  unified: string;
  /** Split form: metadata tarball and rootfs tarball. */
  metadata: string;
  rootfs: string;
  /** Directory holding the files; remove it when done. */
  dir: string;
}

export type Compression = 'gzip' | 'xz' | 'bzip2' | 'zstd' | 'none';

const TAR_FLAG: Record<Compression, string[]> = {
  gzip: ['-z'], xz: ['-J'], bzip2: ['-j'], zstd: ['--zstd'], none: [],
};

function writeRootfs(root: string): void {
  for (const d of ['bin', 'sbin', 'usr/bin', 'usr/sbin', 'etc', 'dev', 'proc', 'sys', 'tmp', 'root', 'run', 'var/log', 'home']) {
    mkdirSync(path.join(root, d), { recursive: true });
  }
  chmodSync(path.join(root, 'tmp'), 0o1777);
  execFileSync('cp', ['/bin/busybox', path.join(root, 'bin/busybox')]);
  const applets = execFileSync('/bin/busybox', ['--list-full'], { encoding: 'utf8' }).split('\n').filter(Boolean);
  for (const applet of applets) {
    const target = path.join(root, applet);
    if (applet === 'bin/busybox') continue;
    mkdirSync(path.dirname(target), { recursive: true });
    const rel = path.relative(path.dirname(target), path.join(root, 'bin/busybox'));
    try { symlinkSync(rel, target); } catch { /* listed twice */ }
  }
  // busybox init: run rcS once, keep a shell on the console, halt on SIGUSR1/SIGUSR2/SIGPWR paths.
  writeFileSync(path.join(root, 'etc/inittab'), '::sysinit:/etc/init.d/rcS\n::respawn:-/bin/sh\n::shutdown:/bin/sync\n');
  mkdirSync(path.join(root, 'etc/init.d'), { recursive: true });
  writeFileSync(path.join(root, 'etc/init.d/rcS'), '#!/bin/sh\n[ -f /etc/hostname ] && hostname -F /etc/hostname\nexit 0\n', { mode: 0o755 });
  writeFileSync(path.join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\nuser:x:1000:1000:user:/home/user:/bin/sh\n');
  writeFileSync(path.join(root, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\nuser:x:1000:\n');
  mkdirSync(path.join(root, 'home/user'), { recursive: true });
  execFileSync('chown', ['1000:1000', path.join(root, 'home/user')]);
}

/** More templates for an image: metadata.yaml lines under `templates:` and the template files. */
export interface ExtraTemplates {
  /** YAML, indented two spaces, appended under `templates:`. */
  yaml: string;
  files: Record<string, string>;
}

function metadataYaml(extra?: ExtraTemplates): string {
  return [
    'architecture: x86_64',
    `creation_date: ${Math.floor(Date.now() / 1000)}`,
    'properties:',
    '  architecture: x86_64',
    '  description: Busybox x86_64',
    '  name: busybox-x86_64',
    '  os: Busybox',
    '  release: "1"',
    'templates:',
    '  /etc/hostname:',
    '    when:',
    '      - create',
    '      - copy',
    '      - rename',
    '    template: hostname.tpl',
    ...(extra ? [extra.yaml.replace(/\n$/, '')] : []),
    '',
  ].join('\n');
}

/** Build the image in a fresh temporary directory; `extra` adds templates beside the hostname one. */
export function buildBusyboxImage(compression: Compression = 'gzip', extra?: ExtraTemplates): BusyboxImage {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-busybox-'));
  const tree = path.join(dir, 'tree');
  writeRootfs(path.join(tree, 'rootfs'));
  writeFileSync(path.join(tree, 'metadata.yaml'), metadataYaml(extra));
  mkdirSync(path.join(tree, 'templates'));
  writeFileSync(path.join(tree, 'templates/hostname.tpl'), '{{ container.name }}\n');
  for (const [name, content] of Object.entries(extra?.files ?? {})) writeFileSync(path.join(tree, 'templates', name), content);
  const ext = compression === 'none' ? 'tar' : `tar.${{ gzip: 'gz', xz: 'xz', bzip2: 'bz2', zstd: 'zst' }[compression]}`;
  const unified = path.join(dir, `busybox.${ext}`);
  const metadata = path.join(dir, `meta.${ext}`);
  const rootfs = path.join(dir, `rootfs.${ext}`);
  const flags = TAR_FLAG[compression];
  execFileSync('tar', ['-c', ...flags, '--numeric-owner', '-f', unified, '-C', tree, 'metadata.yaml', 'templates', 'rootfs']);
  execFileSync('tar', ['-c', ...flags, '--numeric-owner', '-f', metadata, '-C', tree, 'metadata.yaml', 'templates']);
  execFileSync('tar', ['-c', ...flags, '--numeric-owner', '-f', rootfs, '-C', path.join(tree, 'rootfs'), '.']);
  rmSync(tree, { recursive: true, force: true });
  return { unified, metadata, rootfs, dir };
}

/** Split form with a squashfs rootfs (mksquashfs from squashfs-tools). */
export function buildSquashfsRootfs(dir: string): string {
  const tree = path.join(dir, 'sqtree');
  writeRootfs(tree);
  const out = path.join(dir, 'rootfs.squashfs');
  execFileSync('mksquashfs', [tree, out, '-noappend', '-quiet', '-all-root'].filter((a) => a !== '-all-root'));
  rmSync(tree, { recursive: true, force: true });
  return out;
}
