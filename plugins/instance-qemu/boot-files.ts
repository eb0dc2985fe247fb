/**
 * The direct-kernel path: when a VM's root disk is an unpartitioned ext2/3/4 filesystem holding
 * `/boot/vmlinux` (an uncompressed ELF kernel, booted through its PVH entry with no unpacking in
 * the guest) or `/boot/vmlinuz` (the tiny test images), its kernel and initrd are read out of the image with
 * debugfs (no mount, nothing of the guest's is run on the host) and QEMU boots them directly,
 * skipping firmware and bootloader. Anything else boots through firmware.
 */
import { open, rm, stat } from 'node:fs/promises';
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

/** Copies /boot/vmlinux or /boot/vmlinuz (and /boot/initrd.img when present) out of `disk`; undefined when it has no kernel. */
export async function extractBootFiles(tools: HostTools, disk: string, kernel: string, initrd: string): Promise<BootFiles | undefined> {
  if (!(await isExtFilesystem(disk))) return undefined;
  await Promise.all([rm(kernel, { force: true }), rm(initrd, { force: true })]);
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
  return { kernel, initrd: (await dump('/boot/initrd.img', initrd)) ? initrd : undefined };
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
