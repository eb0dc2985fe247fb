/**
 * The test VM image for tests that need a virtual machine: built once per test process (the
 * kernel package is fetched once per machine into the shared cache), imported into a daemon with
 * an alias. Also boots the image's disk under QEMU directly, without a daemon, for checking the
 * image itself.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { hostArchitecture } from '../../bin/images/metadata.js';
import { importImage, type SplitImage } from '../../bin/images/import.js';
import { busyboxRelease } from '../../bin/images/busybox.js';
import { vmKernel } from '../../bin/images/vm-kernel.js';
import { vmMetadata, writeVmDisk, writeVmRootfs } from '../../bin/images/vm.js';

export const QEMU = 'qemu-system-x86_64';

/** Why VM tests cannot run here, or undefined when they can. */
export function vmProblem(): string | undefined {
  if (hostArchitecture() !== 'x86_64') return 'the test VM image is built for x86_64 hosts only';
  for (const tool of [QEMU, 'qemu-img', 'mkfs.ext4', 'debugfs', 'cpio', 'apt-get']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0) return `${tool} is not installed (scripts/install.sh installs it)`;
  }
  return undefined;
}

let built: Promise<SplitImage> | undefined;

/** The split image files, built at the first call of this process. */
export function testVmImage(): Promise<SplitImage> {
  built ??= (async () => {
    const work = mkdtempSync(path.join(tmpdir(), 'corral-test-vm-'));
    process.once('exit', () => rmSync(work, { recursive: true, force: true }));
    const kernel = vmKernel(process.env.CORRAL_CACHE_DIR || '/var/cache/corral');
    const root = path.join(work, 'rootfs');
    writeVmRootfs(root, kernel, work);
    const rootfs = path.join(work, 'rootfs.img');
    writeVmDisk(root, work, rootfs);
    rmSync(root, { recursive: true, force: true });
    mkdirSync(path.join(work, 'meta'));
    writeFileSync(path.join(work, 'meta/metadata.yaml'), vmMetadata(kernel, busyboxRelease()));
    const metadata = path.join(work, 'metadata.tar.gz');
    const tar = spawnSync('tar', ['-czf', metadata, '-C', path.join(work, 'meta'), 'metadata.yaml']);
    if (tar.status !== 0) throw new Error(`tar failed: ${tar.stderr}`);
    return { metadata, rootfs, rootfsPart: 'rootfs.img' as const };
  })();
  return built;
}

/** Import the test VM image into the daemon on `socket` as `alias`; answers its fingerprint. */
export async function importTestVmImage(socket: string, alias = 'busybox-vm'): Promise<string> {
  return (await importImage(socket, await testVmImage(), alias)).fingerprint;
}

export interface BootedGuest {
  /** Serial console output so far. */
  console(): string;
  /** Resolves when `text` shows on the console; rejects after `timeoutMs`. */
  waitFor(text: string, timeoutMs: number): Promise<number>;
  write(text: string): void;
  qmpSocket: string;
  exited: Promise<number | null>;
  kill(): void;
}

/**
 * Boot the image's disk (qcow2 `rootfs`) under TCG with the kernel and initramfs it holds, as the
 * direct-kernel path does, with a config share in `work`/config and the serial console on stdio
 * (`extraArgs`: more devices, such as the guest agent's port).
 */
export function bootDisk(rootfs: string, work: string, hostname: string, extraArgs: string[] = []): BootedGuest {
  const raw = path.join(work, 'root.raw');
  const run = (cmd: string, args: string[]) => {
    const out = spawnSync(cmd, args, { encoding: 'utf8' });
    if (out.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${out.stderr}`);
  };
  run('qemu-img', ['convert', '-f', 'qcow2', '-O', 'raw', rootfs, raw]);
  for (const [from, to] of [['/boot/vmlinux', 'vmlinux'], ['/boot/initrd.img', 'initrd.img']]) run('debugfs', ['-R', `dump ${from} ${path.join(work, to!)}`, raw]);
  const config = path.join(work, 'config');
  mkdirSync(path.join(config, 'cloud-init'), { recursive: true });
  writeFileSync(path.join(config, 'cloud-init/meta-data'), `instance-id: ${hostname}\nlocal-hostname: ${hostname}\n`);
  const qmpSocket = path.join(work, 'qmp.sock');
  const qemu = spawn(QEMU, [
    '-machine', 'q35', '-accel', 'tcg', '-m', '256', '-smp', '1', '-nodefaults', '-display', 'none', '-no-reboot',
    '-bios', 'qboot.rom', '-serial', 'stdio',
    '-kernel', path.join(work, 'vmlinux'), '-initrd', path.join(work, 'initrd.img'),
    '-append', 'root=/dev/vda rw console=ttyS0 panic=-1 quiet',
    '-drive', `file=${raw},format=raw,if=none,id=root`, '-device', 'virtio-blk-pci,drive=root',
    '-fsdev', `local,id=config,path=${config},readonly=on,security_model=none`, '-device', 'virtio-9p-pci,fsdev=config,mount_tag=config',
    '-qmp', `unix:${qmpSocket},server=on,wait=off`,
    ...extraArgs,
  ], { stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  const waiters: { text: string; resolve: (ms: number) => void }[] = [];
  const started = Date.now();
  qemu.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
    for (const w of waiters.splice(0)) {
      if (output.includes(w.text)) w.resolve(Date.now() - started);
      else waiters.push(w);
    }
  });
  qemu.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => qemu.on('exit', (code) => resolve(code)));
  return {
    console: () => output,
    waitFor: (text, timeoutMs) => new Promise((resolve, reject) => {
      if (output.includes(text)) return resolve(Date.now() - started);
      const timer = setTimeout(() => reject(new Error(`"${text}" did not show within ${timeoutMs} ms; console:\n${output.slice(-2000)}`)), timeoutMs);
      waiters.push({ text, resolve: (ms) => { clearTimeout(timer); resolve(ms); } });
    }),
    write: (text) => qemu.stdin.write(text),
    qmpSocket,
    exited,
    kill: () => qemu.kill('SIGKILL'),
  };
}

/** Whether the kernel cache already holds a kernel (a first fetch downloads 70 MB). */
export const kernelCached = () => existsSync(path.join(process.env.CORRAL_CACHE_DIR || '/var/cache/corral', 'vm-kernel'));

/** Why VM tests cannot run here (the lifecycle tests' name for vmProblem). */
export const vmSkipReason = vmProblem;

/** Imports the test VM image into the daemon `d` under `alias`. */
export async function importVmImage(d: { socket: string }, alias: string): Promise<void> {
  await importTestVmImage(d.socket, alias);
}

/** QEMU processes running a VM of this data directory (not the KVM probe, which boots a VM's kernel alone). */
export function qemuOf(dataDir: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (cmd.startsWith('qemu-system') && cmd.includes(`\0-readconfig\0${dataDir}/qemu/`) && !/^\d+ \(.*\) Z/.test(stat)) out.push(Number(entry));
    } catch { /* gone */ }
  }
  return out;
}
