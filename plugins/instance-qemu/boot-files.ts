/**
 * The direct-kernel path: when a VM's root disk is an unpartitioned ext2/3/4 filesystem holding
 * `/boot/vmlinux` (an uncompressed ELF kernel, booted through its PVH entry with no unpacking in
 * the guest) or `/boot/vmlinuz` (the tiny test images), its kernel and initrd are read out of the image with
 * debugfs (no mount, nothing of the guest's is run on the host) and QEMU boots them directly,
 * skipping firmware and bootloader. Anything else boots through firmware.
 */
import { existsSync } from 'node:fs';
import { open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { HostTools } from '../../sdk/index.js';

const EXT_MAGIC_OFFSET = 1024 + 56;
const EXT_MAGIC = 0xef53;

export async function isExtFilesystem(disk: string): Promise<boolean> {
  const handle = await open(disk, 'r').catch(() => undefined);
  if (!handle) return false;
  try {
    const buf = Buffer.alloc(2);
    const { bytesRead } = await handle.read(buf, 0, 2, EXT_MAGIC_OFFSET);
    return bytesRead === 2 && buf.readUInt16LE(0) === EXT_MAGIC;
  } finally {
    await handle.close();
  }
}

export interface BootFiles {
  kernel: string;
  initrd?: string;
}

const BOOT_PATHS = ['/boot/vmlinux', '/boot/vmlinuz', '/boot/initrd.img'];

/** `debugfs stat` of several paths in one run. */
async function statMany(tools: HostTools, disk: string, paths: string[]): Promise<string> {
  const r = await tools.run('debugfs', ['-f', '-', disk], { input: paths.map((p) => `stat ${p}\n`).join(''), timeoutMs: 30_000, allowFailure: true });
  return r.stdout;
}

/**
 * What identifies the boot files in `disk`: inode, size and change times of /boot's kernels and
 * initrd (and of what their links point to). Access times are left out: a guest reading its own
 * kernel must not force a new copy.
 */
export async function bootSignature(tools: HostTools, disk: string): Promise<string> {
  let out = await statMany(tools, disk, BOOT_PATHS);
  const targets = [...out.matchAll(/Fast link dest: "([^"]*)"/g)].map((m) => (m[1]!.startsWith('/') ? m[1]! : path.posix.join('/boot', m[1]!)));
  if (targets.length) out += await statMany(tools, disk, targets);
  return out.split('\n').filter((l) => /^(debugfs: stat|Inode:|User:|\s*ctime:|\s*mtime:|Fast link dest:)/.test(l) || /not found/.test(l)).join('\n');
}

/**
 * Copies /boot/vmlinux or /boot/vmlinuz (and /boot/initrd.img when present) out of `disk`;
 * undefined when it has no kernel. The copies of the last start are kept while the disk's boot
 * files are the same (`signatureFile`): a 66 MB kernel is not read out again at every start.
 */
export async function extractBootFiles(tools: HostTools, disk: string, kernel: string, initrd: string, signatureFile?: string): Promise<BootFiles | undefined> {
  if (!(await isExtFilesystem(disk))) return undefined;
  const signature = signatureFile ? await bootSignature(tools, disk) : '';
  if (signatureFile && existsSync(kernel) && (await readFile(signatureFile, 'utf8').catch(() => undefined)) === signature) {
    return { kernel, initrd: existsSync(initrd) ? initrd : undefined };
  }
  await Promise.all([rm(kernel, { force: true }), rm(initrd, { force: true })]);
  if (signatureFile) await rm(signatureFile, { force: true });
  const dump = async (from: string, to: string, hops = 0): Promise<boolean> => {
    // A symlink (vmlinux -> vmlinux-6.1.0-amd64) is followed, a few hops at most, relative to its directory.
    const target = await linkTarget(tools, disk, from);
    if (target !== undefined) {
      if (hops >= 4) return false;
      return dump(target.startsWith('/') ? target : path.posix.join(path.posix.dirname(from), target), to, hops + 1);
    }
    // debugfs reports a missing file on stderr and still exits 0: the output file tells.
    await tools.run('debugfs', ['-R', `dump ${from} ${to}`, disk], { timeoutMs: 30_000, allowFailure: true });
    const st = await stat(to).catch(() => undefined);
    if (!st || st.size === 0) {
      await rm(to, { force: true });
      return false;
    }
    return true;
  };
  if (!(await dump('/boot/vmlinux', kernel)) && !(await dump('/boot/vmlinuz', kernel))) return undefined;
  const found = { kernel, initrd: (await dump('/boot/initrd.img', initrd)) ? initrd : undefined };
  if (signatureFile) await writeFile(signatureFile, signature);
  return found;
}

/** Where `file` points when it is a symlink in `disk`'s file system (debugfs `stat`). */
async function linkTarget(tools: HostTools, disk: string, file: string): Promise<string | undefined> {
  const r = await tools.run('debugfs', ['-R', `stat ${file}`, disk], { timeoutMs: 30_000, allowFailure: true });
  if (!/Type: symlink/.test(r.stdout)) return undefined;
  const fast = /Fast link dest: "(.*)"/.exec(r.stdout)?.[1];
  if (fast !== undefined) return fast;
  // A long target is kept in a data block: `cat` reads it.
  const slow = await tools.run('debugfs', ['-R', `cat ${file}`, disk], { timeoutMs: 30_000, allowFailure: true });
  return slow.stdout.trim() || undefined;
}
