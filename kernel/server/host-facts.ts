/** Facts about the host for the `environment` of GET /1.0, read once at start from /etc, /proc and uname. */
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import { findOnPath } from '../host-tools/host-tools.js';

export interface HostFacts {
  architectures: string[];
  kernel: string;
  kernel_architecture: string;
  kernel_version: string;
  kernel_features: Record<string, string>;
  os_name: string;
  os_version: string;
  firewall: string;
  server_name: string;
}

/** Architectures a host can run (its own and the 32-bit personality where the kernel offers one). */
const PERSONALITIES: Record<string, string[]> = {
  x86_64: ['x86_64', 'i686'],
  aarch64: ['aarch64', 'armv7l'],
  ppc64le: ['ppc64le'],
  s390x: ['s390x'],
  riscv64: ['riscv64'],
};

function versionAtLeast(release: string, major: number, minor: number): boolean {
  const [a = 0, b = 0] = release.split(/[.-]/).map(Number);
  return a > major || (a === major && b >= minor);
}

async function osRelease(): Promise<{ name: string; version: string }> {
  const text = await readFile('/etc/os-release', 'utf8').catch(() => '');
  const field = (key: string) => new RegExp(`^${key}="?([^"\\n]*)"?$`, 'm').exec(text)?.[1] ?? '';
  return { name: field('NAME'), version: field('VERSION_ID') };
}

export async function probeHostFacts(): Promise<HostFacts> {
  const machine = os.machine();
  const release = os.release();
  const [rel, filesystems, nft] = await Promise.all([
    osRelease(),
    readFile('/proc/filesystems', 'utf8').catch(() => ''),
    findOnPath('nft'),
  ]);
  // Feature availability follows the kernel release that introduced each one.
  const kernel_features: Record<string, string> = {
    idmapped_mounts: String(versionAtLeast(release, 5, 12)),
    netnsid_getifaddrs: String(versionAtLeast(release, 4, 20)),
    seccomp_listener: String(versionAtLeast(release, 5, 0)),
    seccomp_listener_continue: String(versionAtLeast(release, 5, 5)),
    shiftfs: String(/\bshiftfs\b/.test(filesystems)),
    uevent_injection: String(versionAtLeast(release, 4, 15)),
    unpriv_fscaps: String(versionAtLeast(release, 4, 14)),
  };
  return {
    architectures: PERSONALITIES[machine] ?? [machine],
    kernel: os.type(),
    kernel_architecture: machine,
    kernel_version: release,
    kernel_features,
    os_name: rel.name,
    os_version: rel.version,
    firewall: nft ? 'nftables' : 'xtables',
    server_name: os.hostname(),
  };
}
