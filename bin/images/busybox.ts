/**
 * The busybox image: a rootfs made from the host's own busybox-static (the binary and its applet
 * links), busybox init with an rcS, and metadata.yaml with a hostname template. With `dhcp` the rcS
 * also brings eth0 up with udhcpc and a default.script that sets the address, the default route
 * and resolv.conf, which is what the first-image command builds; the tests use it without.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { metadataYaml, type ImageTemplate } from './metadata.js';

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

export interface BusyboxOptions {
  /** Bring eth0 up by DHCP at boot (when the container has one). */
  dhcp?: boolean;
}

/** More templates for an image: metadata.yaml lines under `templates:` and the template files. */
export interface ExtraTemplates {
  /** YAML, indented two spaces, appended under `templates:`. */
  yaml: string;
  files: Record<string, string>;
}

export const BUSYBOX = '/bin/busybox';

const TAR_FLAG: Record<Compression, string[]> = {
  gzip: ['-z'], xz: ['-J'], bzip2: ['-j'], zstd: ['--zstd'], none: [],
};

const RCS = '#!/bin/sh\n[ -f /etc/hostname ] && hostname -F /etc/hostname\nexit 0\n';

// -b: go on in the background when no lease comes at once; -S: log to syslog rather than the console.
const RCS_DHCP = `#!/bin/sh
[ -f /etc/hostname ] && hostname -F /etc/hostname
ip link set lo up
if [ -e /sys/class/net/eth0 ]; then
  ip link set eth0 up
  udhcpc -b -S -i eth0 -p /run/udhcpc.eth0.pid -s /usr/share/udhcpc/default.script -x hostname:"$(hostname)"
fi
exit 0
`;

// udhcpc calls this with deconfig, bound, renew, leasefail or nak; the lease is in the environment.
const DHCP_SCRIPT = `#!/bin/sh
case "$1" in
  deconfig)
    ip -4 addr flush dev "$interface"
    ip link set "$interface" up
    ;;
  bound|renew)
    current=$(ip -4 -o addr show dev "$interface" | awk '{print $4}')
    if [ "$current" != "$ip/$mask" ]; then
      ip -4 addr flush dev "$interface"
      ip addr add "$ip/$mask" \${broadcast:+broadcast "$broadcast"} dev "$interface"
    fi
    if [ -n "$router" ]; then
      while ip route del default dev "$interface" 2>/dev/null; do :; done
      for gateway in $router; do
        ip route add default via "$gateway" dev "$interface" && break
      done
    fi
    {
      [ -n "$domain" ] && echo "search $domain"
      for server in $dns; do echo "nameserver $server"; done
    } > /etc/resolv.conf
    ;;
esac
exit 0
`;

const HOSTNAME_TEMPLATE: ImageTemplate = { path: '/etc/hostname', template: 'hostname.tpl', when: ['create', 'copy', 'rename'] };
const HOSTS_TEMPLATE: ImageTemplate = { path: '/etc/hosts', template: 'hosts.tpl', when: ['create', 'copy', 'rename'] };

/** Why the host's busybox cannot make an image, or undefined when it can (a container has none of the host's libraries). */
export function busyboxProblem(): string | undefined {
  if (!existsSync(BUSYBOX)) return `${BUSYBOX} is missing (apt-get install busybox-static)`;
  // ldd fails on a static binary ("not a dynamic executable"), which is the one wanted.
  if (spawnSync('ldd', [BUSYBOX], { stdio: 'ignore' }).status === 0) return `${BUSYBOX} is linked dynamically: the image needs busybox-static (apt-get install busybox-static)`;
  return undefined;
}

/** The rootfs at `root`: busybox, its applet links, init scripts, users. */
export function writeBusyboxRootfs(root: string, options: BusyboxOptions = {}): void {
  for (const d of ['bin', 'sbin', 'usr/bin', 'usr/sbin', 'etc', 'dev', 'proc', 'sys', 'tmp', 'root', 'run', 'var/log', 'home']) {
    mkdirSync(path.join(root, d), { recursive: true });
  }
  chmodSync(path.join(root, 'tmp'), 0o1777);
  execFileSync('cp', [BUSYBOX, path.join(root, 'bin/busybox')]);
  const applets = execFileSync(BUSYBOX, ['--list-full'], { encoding: 'utf8' }).split('\n').filter(Boolean);
  for (const applet of applets) {
    const target = path.join(root, applet);
    if (applet === 'bin/busybox') continue;
    mkdirSync(path.dirname(target), { recursive: true });
    const rel = path.relative(path.dirname(target), path.join(root, 'bin/busybox'));
    try { symlinkSync(rel, target); } catch { /* listed twice */ }
  }
  // busybox init: run rcS once, keep a shell on the console, sync at shutdown.
  writeFileSync(path.join(root, 'etc/inittab'), '::sysinit:/etc/init.d/rcS\n::respawn:-/bin/sh\n::shutdown:/bin/sync\n');
  mkdirSync(path.join(root, 'etc/init.d'), { recursive: true });
  writeFileSync(path.join(root, 'etc/init.d/rcS'), options.dhcp ? RCS_DHCP : RCS, { mode: 0o755 });
  if (options.dhcp) {
    mkdirSync(path.join(root, 'usr/share/udhcpc'), { recursive: true });
    writeFileSync(path.join(root, 'usr/share/udhcpc/default.script'), DHCP_SCRIPT, { mode: 0o755 });
    writeFileSync(path.join(root, 'etc/resolv.conf'), '');
  }
  writeFileSync(path.join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\nuser:x:1000:1000:user:/home/user:/bin/sh\n');
  writeFileSync(path.join(root, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\nuser:x:1000:\n');
  mkdirSync(path.join(root, 'home/user'), { recursive: true });
  execFileSync('chown', ['1000:1000', path.join(root, 'home/user')]);
}

/** The busybox version the image carries, for its description. */
export function busyboxRelease(): string {
  const banner = execFileSync(BUSYBOX, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n')[0] ?? '';
  return banner.match(/v(\d+\.\d+\.\d+)/)?.[1] ?? 'unknown';
}

/** The image tree at `tree`: metadata.yaml, templates/ and rootfs/. */
export function writeBusyboxTree(tree: string, options: BusyboxOptions = {}, extra?: ExtraTemplates): void {
  writeBusyboxRootfs(path.join(tree, 'rootfs'), options);
  mkdirSync(path.join(tree, 'templates'), { recursive: true });
  writeFileSync(path.join(tree, 'templates/hostname.tpl'), '{{ container.name }}\n');
  const templates = [HOSTNAME_TEMPLATE];
  // The test image stays as it always was; the first image also names itself in /etc/hosts, as real images do.
  const properties: Record<string, string> = options.dhcp
    ? { description: `Busybox ${busyboxRelease()} from the host's busybox-static`, name: 'busybox', os: 'Busybox', release: busyboxRelease(), variant: 'default' }
    : { description: 'Busybox x86_64', name: 'busybox-x86_64', os: 'Busybox', release: '1' };
  if (options.dhcp) {
    templates.push(HOSTS_TEMPLATE);
    writeFileSync(path.join(tree, 'templates/hosts.tpl'), '127.0.0.1 localhost\n127.0.1.1 {{ container.name }}\n::1 localhost ip6-localhost ip6-loopback\n');
  }
  writeFileSync(path.join(tree, 'metadata.yaml'), metadataYaml(properties, templates, extra?.yaml));
  for (const [name, content] of Object.entries(extra?.files ?? {})) writeFileSync(path.join(tree, 'templates', name), content);
}

/** Build the image (unified and split) in a fresh temporary directory; `extra` adds templates beside the hostname one. */
export function buildBusyboxImage(compression: Compression = 'gzip', extra?: ExtraTemplates, options: BusyboxOptions = {}): BusyboxImage {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-busybox-'));
  const tree = path.join(dir, 'tree');
  writeBusyboxTree(tree, options, extra);
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
  writeBusyboxRootfs(tree);
  const out = path.join(dir, 'rootfs.squashfs');
  execFileSync('mksquashfs', [tree, out, '-noappend', '-quiet']);
  rmSync(tree, { recursive: true, force: true });
  return out;
}
