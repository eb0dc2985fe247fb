/**
 * Files (images, backups) are recognised by their first bytes, never by their names: clients name files as
 * they like, and a wrong guess would only surface later as an unpack failure.
 */
import { open } from 'node:fs/promises';

export type Compression = 'gzip' | 'bzip2' | 'xz' | 'lzma' | 'zstd' | 'lz4' | 'none';

/** What an uploaded file holds. */
export type FileFormat = { kind: 'tar'; compression: Compression } | { kind: 'squashfs' } | { kind: 'qcow2' };

const MAGICS: { bytes: number[]; offset?: number; format: FileFormat }[] = [
  { bytes: [0x1f, 0x8b], format: { kind: 'tar', compression: 'gzip' } },
  { bytes: [0x42, 0x5a, 0x68], format: { kind: 'tar', compression: 'bzip2' } },
  { bytes: [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00], format: { kind: 'tar', compression: 'xz' } },
  { bytes: [0x28, 0xb5, 0x2f, 0xfd], format: { kind: 'tar', compression: 'zstd' } },
  { bytes: [0x04, 0x22, 0x4d, 0x18], format: { kind: 'tar', compression: 'lz4' } },
  { bytes: [0x5d, 0x00, 0x00], format: { kind: 'tar', compression: 'lzma' } },
  { bytes: [0x68, 0x73, 0x71, 0x73], format: { kind: 'squashfs' } },
  { bytes: [0x51, 0x46, 0x49, 0xfb], format: { kind: 'qcow2' } },
  // A plain tar carries "ustar" in its first header.
  { bytes: [0x75, 0x73, 0x74, 0x61, 0x72], offset: 257, format: { kind: 'tar', compression: 'none' } },
];

export async function detectFormat(file: string): Promise<FileFormat | undefined> {
  const fh = await open(file, 'r');
  try {
    const head = Buffer.alloc(512);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    const bytes = head.subarray(0, bytesRead);
    return MAGICS.find((m) => m.bytes.every((b, i) => bytes[(m.offset ?? 0) + i] === b))?.format;
  } finally {
    await fh.close();
  }
}

/** tar's own option for each compression (tar runs the decompressor itself). */
export function tarFlags(compression: Compression): string[] {
  switch (compression) {
    case 'gzip': return ['-z'];
    case 'bzip2': return ['-j'];
    case 'xz': return ['-J'];
    case 'lzma': return ['--lzma'];
    case 'zstd': return ['--zstd'];
    case 'lz4': return ['--use-compress-program=lz4'];
    case 'none': return [];
  }
}

/** File name extension of a format, as exports name their files. */
export function formatExtension(format: FileFormat): string {
  switch (format.kind) {
    case 'squashfs': return '.squashfs';
    case 'qcow2': return '.img';
    case 'tar': return {
      gzip: '.tar.gz', bzip2: '.tar.bz2', xz: '.tar.xz', lzma: '.tar.lzma', zstd: '.tar.zst', lz4: '.tar.lz4', none: '.tar',
    }[format.compression];
  }
}
