/**
 * The kernel of the test VM image: Debian's generic kernel package (linux-image-amd64's current
 * dependency), fetched with `apt-get download` and unpacked once into a cache shared by every data
 * dir (it is 70 MB to fetch and 400 MB unpacked, so only the kernel, uncompressed, and the few
 * modules a VM needs are kept). Debian builds virtio, ext4 and 9p as modules and ships no modules.dep, so the
 * dependencies are read from each module's own `.modinfo` strings.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Modules the guest loads at boot: disks, NICs, the agent's serial port, the root file system, the
 * config share, the ACPI power button. ext4 asks for crc32c only as a soft dependency (an alias,
 * `crypto-crc32c`), so the module behind it is named here.
 */
export const VM_MODULES = ['virtio_pci', 'virtio_blk', 'virtio_net', 'virtio_console', 'crc32c_generic', 'ext4', '9pnet_virtio', '9p', 'button', 'evdev'];

export interface VmKernel {
  /** Kernel release (6.1.0-56-amd64). */
  release: string;
  /** The uncompressed kernel (ELF, with a PVH entry point). */
  vmlinux: string;
  /** The modules to load, each a .ko file, in an order where every module follows its dependencies. */
  modules: string[];
}

export class KernelFetchError extends Error {}

function run(cmd: string, args: string[], cwd?: string): string {
  const out = spawnSync(cmd, args, { cwd, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (out.error) throw new KernelFetchError(`${cmd} could not run: ${out.error.message}`);
  if (out.status !== 0) throw new KernelFetchError(`${cmd} ${args.join(' ')} failed: ${(out.stderr || out.stdout).trim().split('\n').slice(-2).join(' ')}`);
  return out.stdout;
}

/** The versioned package linux-image-amd64 depends on now, and its version. */
function kernelPackage(): { name: string; version: string } {
  const depends = run('apt-cache', ['depends', 'linux-image-amd64']);
  const name = depends.match(/Depends: (linux-image-\S+-amd64)/)?.[1];
  if (!name) throw new KernelFetchError('apt knows no linux-image-amd64 (run apt-get update)');
  const version = run('apt-cache', ['show', '--no-all-versions', name]).match(/^Version: (\S+)/m)?.[1];
  if (!version) throw new KernelFetchError(`apt knows no version of ${name}`);
  return { name, version };
}

/** A module's `key=value` strings from its .modinfo section (plain NUL-terminated text in the file). */
function modinfo(file: string, key: string): string | undefined {
  const bytes = readFileSync(file);
  const needle = Buffer.from(`\0${key}=`);
  const at = bytes.indexOf(needle);
  if (at < 0) return undefined;
  const start = at + needle.length;
  return bytes.subarray(start, bytes.indexOf(0, start)).toString('utf8');
}

/** Every module file under `dir` by module name (dashes and underscores are one to modprobe). */
function moduleFiles(dir: string): Map<string, string> {
  const found = new Map<string, string>();
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, entry.name);
      if (entry.isDirectory()) walk(p);
      else if (entry.name.endsWith('.ko')) found.set(entry.name.slice(0, -3).replace(/-/g, '_'), p);
    }
  };
  walk(dir);
  return found;
}

/**
 * The ELF kernel inside a bzImage: its payload is an xz stream (Debian builds with KERNEL_XZ).
 * QEMU boots an ELF kernel through its PVH entry point, with no decompression in the guest, which
 * under TCG saves over three seconds of a four-second boot.
 */
function writeVmlinux(bzImage: string, out: string): void {
  const image = readFileSync(bzImage);
  const start = image.indexOf(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]));
  if (start < 0) throw new KernelFetchError(`${path.basename(bzImage)} holds no xz-compressed kernel`);
  const xz = spawnSync('xz', ['-dc', '--single-stream'], { input: image.subarray(start), maxBuffer: 512 << 20 });
  // The payload is followed by the bzImage's own trailer, which xz reports after the stream ends.
  const elf = xz.stdout;
  if (!elf || elf.length < 4 || elf.readUInt32BE(0) !== 0x7f454c46) throw new KernelFetchError(`the kernel in ${path.basename(bzImage)} did not unpack to an ELF file`);
  writeFileSync(out, elf);
}

/** `wanted` and what they need, dependencies first. */
function loadOrder(files: Map<string, string>, wanted: string[]): string[] {
  const order: string[] = [];
  const visit = (name: string, trail: string[]) => {
    const key = name.replace(/-/g, '_');
    if (order.includes(key)) return;
    if (trail.includes(key)) throw new KernelFetchError(`modules depend on each other in a loop: ${[...trail, key].join(' > ')}`);
    const file = files.get(key);
    if (!file) throw new KernelFetchError(`the kernel package has no module ${key}`);
    for (const dep of (modinfo(file, 'depends') ?? '').split(',').filter(Boolean)) visit(dep, [...trail, key]);
    order.push(key);
  };
  for (const name of wanted) visit(name, []);
  return order;
}

/** The kernel and modules, from the cache or fetched into it (`cacheDir`/vm-kernel/<package>_<version>). */
export function vmKernel(cacheDir: string, onStep: (text: string) => void = () => {}): VmKernel {
  const pkg = kernelPackage();
  const dir = path.join(cacheDir, 'vm-kernel', `${pkg.name}_${pkg.version}`);
  const manifest = path.join(dir, 'kernel.json');
  if (!existsSync(manifest)) {
    mkdirSync(path.dirname(dir), { recursive: true });
    const work = mkdtempSync(`${dir}.partial-`);
    try {
      onStep(`fetching ${pkg.name} ${pkg.version} with apt-get download`);
      run('apt-get', ['download', '-q', `${pkg.name}=${pkg.version}`], work);
      const deb = readdirSync(work).find((f) => f.endsWith('.deb'));
      if (!deb) throw new KernelFetchError(`apt-get download left no .deb for ${pkg.name}`);
      onStep('unpacking the kernel and picking the modules a VM needs');
      const tree = path.join(work, 'tree');
      run('dpkg-deb', ['-x', path.join(work, deb), tree]);
      const release = readdirSync(path.join(tree, 'lib/modules'))[0];
      if (!release) throw new KernelFetchError(`${deb} holds no modules`);
      const files = moduleFiles(path.join(tree, 'lib/modules', release));
      const order = loadOrder(files, VM_MODULES);
      const out = path.join(work, 'out');
      mkdirSync(path.join(out, 'modules'), { recursive: true });
      writeVmlinux(path.join(tree, 'boot', `vmlinuz-${release}`), path.join(out, 'vmlinux'));
      for (const name of order) copyFileSync(files.get(name)!, path.join(out, 'modules', `${name}.ko`));
      writeFileSync(path.join(out, 'kernel.json'), JSON.stringify({ release, modules: order }));
      renameSync(out, dir);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  const { release, modules } = JSON.parse(readFileSync(manifest, 'utf8')) as { release: string; modules: string[] };
  return { release, vmlinux: path.join(dir, 'vmlinux'), modules: modules.map((m) => path.join(dir, 'modules', `${m}.ko`)) };
}

/** Whether apt can fetch packages here (the build's first check). */
export function hasApt(): boolean {
  try {
    execFileSync('apt-cache', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
