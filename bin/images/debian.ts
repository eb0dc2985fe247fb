/**
 * The Debian image: a minbase rootfs made by debootstrap from a Debian mirror, with systemd as init
 * and systemd-networkd bringing eth0 up by DHCP (resolved writes resolv.conf), hostname and hosts
 * templates, packed as a unified image. The packages debootstrap fetches are kept in a tarball
 * under the cache dir, so a second build does not download them again.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { hostArchitecture, imageSerial, metadataYaml } from './metadata.js';

export interface DebianOptions {
  release: string;
  mirror: string;
  /** Where the package tarball is kept between builds. */
  cacheDir: string;
  /** Where the image tree is made (removed afterwards by the caller). */
  workDir: string;
  /** Stops debootstrap (SIGINT, which its cleanup traps) and the build. */
  signal?: AbortSignal;
}

export interface DebianProgress {
  /** A step of the build, or a stage of debootstrap (checking the release, installing core packages, …). */
  stage(text: string): void;
  /** `n` packages through one of debootstrap's per-package steps (Retrieving, Extracting, Unpacking, …). */
  packages(verb: string, n: number): void;
}

/** Told to the user as it is: the mirror, debootstrap or the host is not as the build needs. */
export class DebianBuildError extends Error {}

// systemd-sysv: an init; udev: networkd waits for it to set links up where /sys is writable (the
// reference's containers); dbus: named because systemd-resolved needs a virtual package debootstrap does not
// resolve; iproute2 and iputils-ping: what an operator tries first on a network.
const INCLUDE = ['systemd-sysv', 'udev', 'dbus', 'systemd-resolved', 'iproute2', 'iputils-ping'];

const DEBIAN_ARCH: Record<string, string> = { x86_64: 'amd64', aarch64: 'arm64', armv7l: 'armhf', i686: 'i386', ppc64le: 'ppc64el', s390x: 's390x', riscv64: 'riscv64' };

const PER_PACKAGE = /^I: (Retrieving|Validating|Extracting|Unpacking|Configuring) ([a-z0-9][a-z0-9+.:-]*)(?:\.\.\.| \S+)?$/;
const NOT_A_PACKAGE = new Set(['required', 'base', 'the', 'Packages', 'InRelease', 'Release']);

const NETWORK_UNIT = '[Match]\nName=eth0\n\n[Network]\nDHCP=yes\n\n[DHCPv4]\nUseDomains=true\n';

export function hasDebootstrap(): boolean {
  return spawnSync('debootstrap', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** The status of a HEAD request (node's http, not fetch: fetch refuses some ports outright). */
function headStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = (url.startsWith('https:') ? https : http).request(url, { method: 'HEAD', timeout: 20_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('no answer in 20 s'), { code: 'ETIMEDOUT' })));
    req.on('error', reject);
    req.end();
  });
}

/** Answers whether `mirror` serves `release`; the reason when it does not. */
export async function checkMirror(mirror: string, release: string): Promise<void> {
  const release_ = `${mirror}/dists/${release}/Release`;
  if (mirror.startsWith('file:')) {
    if (!existsSync(fileURLToPath(release_))) throw new DebianBuildError(`the Debian mirror ${mirror} has no ${release} (no ${release_})`);
    return;
  }
  let status: number;
  try {
    status = await headStatus(release_);
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new DebianBuildError(`cannot reach the Debian mirror ${mirror} (${why}): check the address, or pass another with --mirror`);
  }
  if (status === 404) throw new DebianBuildError(`the Debian mirror ${mirror} has no release "${release}" (${release_} answered 404)`);
  if (status >= 400) throw new DebianBuildError(`the Debian mirror ${mirror} answered ${status} for ${release_}`);
}

/** The package tarball of this release, architecture and package list from this mirror. */
export function cachedPackages(options: DebianOptions): string {
  const key = createHash('sha256').update(`${options.mirror}\n${INCLUDE.join(',')}`).digest('hex').slice(0, 12);
  return path.join(options.cacheDir, `debian-${options.release}-${DEBIAN_ARCH[hostArchitecture()] ?? hostArchitecture()}-minbase-${key}.tgz`);
}

/** The end of debootstrap's own log in `target`, which goes with the build dir. */
function logTail(target: string): string[] {
  const log = path.join(target, 'debootstrap/debootstrap.log');
  if (!existsSync(log)) return [];
  return ['(end of debootstrap.log)', ...readFileSync(log, 'utf8').trimEnd().split('\n').slice(-15)];
}

/** Runs debootstrap, reporting its stages; its last lines of output when it fails. */
function debootstrap(args: string[], target: string, progress: DebianProgress, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    signal?.throwIfAborted();
    const child = spawn('debootstrap', args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    const stop = () => child.kill('SIGINT');
    signal?.addEventListener('abort', stop, { once: true });
    const tail: string[] = [];
    const counts = new Map<string, number>();
    const onLine = (line: string) => {
      tail.push(line);
      if (tail.length > 20) tail.shift();
      if (!line.startsWith('I: ')) return;
      // debootstrap names every package it touches: those lines are counted, the others are stages.
      const each = line.match(PER_PACKAGE);
      if (each && !NOT_A_PACKAGE.has(each[2]!)) {
        const n = (counts.get(each[1]!) ?? 0) + 1;
        counts.set(each[1]!, n);
        progress.packages(each[1]!, n);
      } else {
        progress.stage(`  ${line.slice(3)}`);
      }
    };
    let pending = '';
    const feed = (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop()!;
      lines.forEach(onLine);
    };
    child.stdout.on('data', feed);
    child.stderr.on('data', feed);
    child.on('error', (err) => reject(new DebianBuildError(`cannot run debootstrap: ${err.message}`)));
    child.on('close', (code) => {
      signal?.removeEventListener('abort', stop);
      if (pending) onLine(pending);
      // Settled only once debootstrap has exited, so its own cleanup (unmounting) has run.
      if (signal?.aborted) reject(signal.reason);
      else if (code === 0) resolve();
      else reject(new DebianBuildError(`debootstrap failed (exit ${code}):\n${[...tail, ...logTail(target)].join('\n')}`));
    });
  });
}

/** Turns the debootstrapped tree into a system that boots in a container and asks for a lease on eth0. */
function configureRootfs(rootfs: string, release: string, mirror: string): void {
  writeFileSync(path.join(rootfs, 'etc/systemd/network/eth0.network'), NETWORK_UNIT);
  const enable = spawnSync('chroot', [rootfs, 'systemctl', 'enable', 'systemd-networkd.service', 'systemd-resolved.service'], { encoding: 'utf8' });
  if (enable.status !== 0) throw new DebianBuildError(`systemctl enable in the rootfs failed: ${enable.stderr}`);
  const resolv = path.join(rootfs, 'etc/resolv.conf');
  rmSync(resolv, { force: true });
  symlinkSync('../run/systemd/resolve/stub-resolv.conf', resolv);
  writeFileSync(path.join(rootfs, 'etc/apt/sources.list'), `deb ${mirror} ${release} main\n`);
  writeFileSync(path.join(rootfs, 'etc/fstab'), '');
  // Each container gets its own machine id at first boot.
  writeFileSync(path.join(rootfs, 'etc/machine-id'), '');
  rmSync(path.join(rootfs, 'var/lib/dbus/machine-id'), { force: true });
  const archives = path.join(rootfs, 'var/cache/apt/archives');
  if (existsSync(archives)) for (const name of readdirSync(archives)) if (name.endsWith('.deb')) rmSync(path.join(archives, name));
  rmSync(path.join(rootfs, 'var/lib/apt/lists'), { recursive: true, force: true });
  mkdirSync(path.join(rootfs, 'var/lib/apt/lists/partial'), { recursive: true });
}

/** Makes the image tree (metadata.yaml, templates/, rootfs/) in `options.workDir`. */
export async function writeDebianTree(options: DebianOptions, progress: DebianProgress): Promise<void> {
  const rootfs = path.join(options.workDir, 'rootfs');
  mkdirSync(options.cacheDir, { recursive: true });
  const packages = cachedPackages(options);
  const common = ['--variant=minbase', `--include=${INCLUDE.join(',')}`, `--arch=${DEBIAN_ARCH[hostArchitecture()] ?? hostArchitecture()}`];
  if (!existsSync(packages)) {
    await checkMirror(options.mirror, options.release);
    progress.stage(`fetching packages from ${options.mirror} (kept in ${packages} for the next build)`);
    const partial = `${packages}.partial`;
    rmSync(partial, { force: true });
    await debootstrap([...common, `--make-tarball=${partial}`, options.release, path.join(options.workDir, 'fetch'), options.mirror], path.join(options.workDir, 'fetch'), progress, options.signal);
    rmSync(path.join(options.workDir, 'fetch'), { recursive: true, force: true });
    renameSync(partial, packages);
  } else {
    progress.stage(`using the packages kept in ${packages}`);
  }
  progress.stage('installing the packages into the rootfs');
  await debootstrap([...common, `--unpack-tarball=${packages}`, options.release, rootfs, options.mirror], rootfs, progress, options.signal);
  configureRootfs(rootfs, options.release, options.mirror);
  const templates = path.join(options.workDir, 'templates');
  mkdirSync(templates);
  writeFileSync(path.join(templates, 'hostname.tpl'), '{{ container.name }}\n');
  writeFileSync(path.join(templates, 'hosts.tpl'), '127.0.0.1 localhost\n127.0.1.1 {{ container.name }}\n\n::1 localhost ip6-localhost ip6-loopback\nff02::1 ip6-allnodes\nff02::2 ip6-allrouters\n');
  writeFileSync(path.join(options.workDir, 'metadata.yaml'), metadataYaml(
    { description: `Debian ${options.release} ${hostArchitecture()} (minbase, ${imageSerial()})`, os: 'Debian', release: options.release, variant: 'minbase', serial: imageSerial() },
    [
      { path: '/etc/hostname', template: 'hostname.tpl', when: ['create', 'copy', 'rename'] },
      { path: '/etc/hosts', template: 'hosts.tpl', when: ['create', 'copy', 'rename'] },
    ],
  ));
}
