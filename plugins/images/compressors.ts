/**
 * The compression of images this server makes (publishing): a name, optionally with a level
 * (`gzip -9`, as clients may send), resolved to a host compressor reading stdin and writing
 * stdout. Everything is checked before the operation starts, so a bad choice is a 400.
 */
import { badRequest, type HostTools } from '../../sdk/index.js';
import type { Compression } from '../../sdk/lib/archive/index.js';

export interface Compressor {
  compression: Compression;
  /** Absent for `none`. */
  command?: string;
  args: string[];
}

type Packed = Exclude<Compression, 'none'>;

const COMMANDS: Record<Packed, { command: string; args: string[]; levels: [number, number] }> = {
  // -n: no name or time stamp in the header, so the same content packs to the same fingerprint.
  gzip: { command: 'gzip', args: ['-c', '-n'], levels: [1, 9] },
  bzip2: { command: 'bzip2', args: ['-c'], levels: [1, 9] },
  xz: { command: 'xz', args: ['-c'], levels: [0, 9] },
  // The xz tools write the legacy format too; decompress.ts reads it the same way.
  lzma: { command: 'xz', args: ['--format=lzma', '-c'], levels: [0, 9] },
  zstd: { command: 'zstd', args: ['-c', '-q'], levels: [1, 19] },
  lz4: { command: 'lz4', args: ['-c', '-q'], levels: [1, 12] },
};

export const PUBLISH_COMPRESSIONS = ['gzip', 'bzip2', 'xz', 'lzma', 'zstd', 'lz4', 'none'];

/** `value` is the request's `compression_algorithm`, `fallback` the project's or the server's `images.compression_algorithm`. */
export async function resolveCompressor(tools: HostTools, value: unknown, fallback: string): Promise<Compressor> {
  if (value !== undefined && value !== null && typeof value !== 'string') throw badRequest('"compression_algorithm" must be a string');
  const fromServer = value === undefined || value === null || value.trim() === '';
  const text = fromServer ? fallback || 'gzip' : value.trim();
  const [name, ...extra] = text.split(/\s+/);
  const where = fromServer ? ' (the images.compression_algorithm setting)' : '';
  if (name === 'none' && extra.length === 0) return { compression: 'none', args: [] };
  if (name === 'squashfs') {
    throw badRequest(`Invalid compression algorithm "${text}"${where}: squashfs is not offered for published images; use one of ${PUBLISH_COMPRESSIONS.join(', ')}`);
  }
  const spec = (COMMANDS as Record<string, (typeof COMMANDS)[Packed] | undefined>)[name!];
  if (!spec) throw badRequest(`Invalid compression algorithm "${text}"${where}: use one of ${PUBLISH_COMPRESSIONS.join(', ')}`);
  const levels = extra.map((arg) => {
    const level = /^-(\d{1,2})$/.exec(arg);
    const n = level ? Number(level[1]) : NaN;
    if (!(n >= spec.levels[0] && n <= spec.levels[1])) {
      throw badRequest(`Invalid compression algorithm "${text}"${where}: only a level -${spec.levels[0]} to -${spec.levels[1]} may follow ${name}`);
    }
    return arg;
  });
  if (levels.length > 1) throw badRequest(`Invalid compression algorithm "${text}"${where}: give at most one level`);
  if (!(await tools.which(spec.command))) {
    throw badRequest(`Invalid compression algorithm "${text}"${where}: it needs "${spec.command}" on this host, and it is not installed`);
  }
  return { compression: name as Packed, command: spec.command, args: [...spec.args, ...levels] };
}
