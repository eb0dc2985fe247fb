/**
 * Walks a tar stream in-process: member names in order and, on request, the content of small
 * members (metadata.yaml). Reading every block to the end checks the archive's framing and
 * header checksums, so a truncated or damaged upload is refused at import instead of failing
 * at the first launch, without running tar twice over the image.
 * Handles ustar names with prefixes, GNU long names, pax `path`, `linkpath` and `size` records
 * (GNU tar's posix format writes 0 in the header and the real size in a pax record from 8 GiB up)
 * and GNU base-256 numbers.
 */
import { badRequest } from '../../errors.js';

export interface TarEntry {
  name: string;
  /** The typeflag character ('0' regular file, '5' directory, '2' symlink, ...). */
  type: string;
  size: number;
  /** Target of a symlink or hard link ('' otherwise). */
  linkname: string;
}

const BLOCK = 512;
/** Members whose size field counts no data in the archive. */
const NO_DATA = new Set(['1', '2', '3', '4', '5', '6']);
/** Largest member content collected in memory (metadata.yaml and the like; also caps long names). */
const MAX_COLLECT = 4 * 1024 * 1024;


function text(block: Buffer, start: number, length: number): string {
  const field = block.subarray(start, start + length);
  const end = field.indexOf(0);
  return field.subarray(0, end < 0 ? field.length : end).toString('utf8');
}

/** Numeric header fields: octal text, or base-256 (GNU) when the high bit of the first byte is set. */
function numeric(block: Buffer, start: number, length: number): number {
  const field = block.subarray(start, start + length);
  if (field[0]! & 0x80) {
    // Base-256 is two's complement: 0xff first means negative, never a size or a checksum.
    if (field[0] === 0xff) throw new RangeError('a header has a negative number');
    let value = field[0]! & 0x7f;
    for (let i = 1; i < field.length; i++) value = value * 256 + field[i]!;
    if (!Number.isSafeInteger(value)) throw new RangeError('a header has a number too large to read');
    return value;
  }
  const digits = field.toString('latin1').replace(/\0.*$/s, '').trim();
  if (digits === '') return 0;
  if (!/^[0-7]+$/.test(digits)) throw new RangeError('a header has an unreadable number');
  return parseInt(digits, 8);
}

function checksumOk(block: Buffer): boolean {
  const stored = numeric(block, 148, 8);
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i]!;
  return sum === stored;
}

/** What a pax extended header overrides in the next member's header. */
interface PaxOverrides {
  path?: string;
  linkpath?: string;
  size?: number;
}

/**
 * Reads a pax record set (`<length> <key>=<value>\n` each). GNU sparse files keep the real name in
 * `GNU.sparse.name`. An empty value removes the override, as POSIX says.
 */
function paxOverrides(records: Buffer): PaxOverrides {
  const found: PaxOverrides & { sparseName?: string } = {};
  let offset = 0;
  while (offset < records.length) {
    const space = records.indexOf(0x20, offset);
    if (space < 0) break;
    const lengthText = records.subarray(offset, space).toString('latin1');
    const length = /^[0-9]{1,10}$/.test(lengthText) ? Number(lengthText) : NaN;
    if (!(length > space - offset + 1) || offset + length > records.length) throw new RangeError('a pax header has a malformed record');
    const record = records.subarray(space + 1, offset + length - 1).toString('utf8');
    const eq = record.indexOf('=');
    const key = eq > 0 ? record.slice(0, eq) : '';
    const value = record.slice(eq + 1);
    if (key === 'path') found.path = value || undefined;
    else if (key === 'linkpath') found.linkpath = value || undefined;
    else if (key === 'GNU.sparse.name') found.sparseName = value || undefined;
    else if (key === 'size') {
      if (value !== '' && !/^[0-9]+$/.test(value)) throw new RangeError(`a pax header has an unreadable size "${value.slice(0, 32)}"`);
      const digits = value.replace(/^0+(?=[0-9])/, '');
      found.size = value === '' ? undefined : digits.length > 16 ? Infinity : Number(digits);
      if (found.size !== undefined && !Number.isSafeInteger(found.size)) throw new RangeError('a pax header has a size too large to read');
    }
    offset += length;
  }
  return { path: found.sparseName ?? found.path, linkpath: found.linkpath, size: found.size };
}

const definedOnly = <T extends object>(o: T): Partial<T> => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

export class TarWalker {
  private readonly header = Buffer.alloc(BLOCK);
  private headerFill = 0;
  /** Data bytes (then padding bytes) of the current member still to come. */
  private remaining = 0;
  private padding = 0;
  private collected: Buffer[] | undefined;
  private collectedFor: 'entry' | 'longname' | 'longlink' | 'pax' | undefined;
  private entry: TarEntry | undefined;
  private longName: string | undefined;
  private longLink: string | undefined;
  /** Overrides from a pax extended header, for the next member only. */
  private pax: PaxOverrides = {};
  private sparseExtensions = false;
  private zeroBlocks = 0;
  private ended = false;
  members = 0;

  /**
   * `onEntry` returns true to receive the member's content through `onContent` (members larger
   * than 4 MiB are refused then).
   */
  constructor(
    /** Names the archive in error messages: "Invalid <label>: ...". */
    private readonly label: string,
    private readonly onEntry: (entry: TarEntry) => boolean,
    private readonly onContent: (entry: TarEntry, content: Buffer) => void = () => {},
  ) {}

  private invalid(why: string) {
    return badRequest(`Invalid ${this.label}: ${why}`);
  }

  push(chunk: Buffer): void {
    try {
      this.consume(chunk);
    } catch (err) {
      if (err instanceof RangeError) throw this.invalid(err.message);
      throw err;
    }
  }

  private consume(chunk: Buffer): void {
    let offset = 0;
    while (offset < chunk.length && !this.ended) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, chunk.length - offset);
        this.collected?.push(chunk.subarray(offset, offset + take));
        this.remaining -= take;
        offset += take;
        if (this.remaining === 0) this.memberDone();
      } else if (this.padding > 0) {
        const take = Math.min(this.padding, chunk.length - offset);
        this.padding -= take;
        offset += take;
      } else {
        const take = Math.min(BLOCK - this.headerFill, chunk.length - offset);
        chunk.copy(this.header, this.headerFill, offset, offset + take);
        this.headerFill += take;
        offset += take;
        if (this.headerFill === BLOCK) {
          this.headerFill = 0;
          this.onHeader();
        }
      }
    }
  }

  /** The stream ended: it must end on a member boundary. */
  finish(): void {
    if (this.remaining > 0 || this.padding > 0 || this.headerFill > 0) throw this.invalid('the archive is truncated');
    if (this.members === 0) throw this.invalid('the archive has no members');
  }

  private onHeader(): void {
    const block = this.header;
    if (this.sparseExtensions) {
      // Old GNU sparse maps continue in extension blocks while their last byte flag says so.
      this.sparseExtensions = block[504] !== 0;
      return;
    }
    if (block.every((b) => b === 0)) {
      if (++this.zeroBlocks === 2) this.ended = true;
      return;
    }
    this.zeroBlocks = 0;
    if (!checksumOk(block)) throw this.invalid('a header checksum does not match (damaged or not a tar archive)');
    const type = String.fromCharCode(block[156] || 0x30);
    const meta = type === 'L' || type === 'K' || type === 'x' || type === 'g';
    // A pax `size` replaces the header's for the member it describes (never for another pax or name record).
    const size = NO_DATA.has(type) ? 0 : (!meta ? this.pax.size : undefined) ?? numeric(block, 124, 12);
    this.remaining = size;
    this.padding = (BLOCK - (size % BLOCK)) % BLOCK;
    this.collected = undefined;
    this.collectedFor = undefined;

    if (type === 'L' || type === 'K' || type === 'x') {
      if (size > MAX_COLLECT) throw this.invalid('a name record is too large');
      this.collected = [];
      this.collectedFor = type === 'L' ? 'longname' : type === 'K' ? 'longlink' : 'pax';
    } else if (type === 'g') {
      // Global pax records say nothing this walk needs.
    } else {
      const ustar = block.subarray(257, 262).toString('latin1') === 'ustar';
      const prefix = ustar ? text(block, 345, 155) : '';
      const base = text(block, 0, 100);
      const name = this.pax.path ?? this.longName ?? (prefix ? `${prefix}/${base}` : base);
      const linkname = this.pax.linkpath ?? this.longLink ?? text(block, 157, 100);
      this.pax = {};
      this.longName = undefined;
      this.longLink = undefined;
      this.members++;
      const entry: TarEntry = { name, type, size, linkname };
      if (type === 'S' && block[482] !== 0) this.sparseExtensions = true;
      if (this.onEntry(entry)) {
        if (size > MAX_COLLECT) throw this.invalid(`${name} is too large`);
        this.entry = entry;
        this.collected = [];
        this.collectedFor = 'entry';
      }
    }
    if (size === 0) this.memberDone();
  }

  private memberDone(): void {
    const content = this.collected ? Buffer.concat(this.collected) : undefined;
    const kind = this.collectedFor;
    this.collected = undefined;
    this.collectedFor = undefined;
    if (!content) return;
    if (kind === 'longname') this.longName = text(content, 0, content.length);
    else if (kind === 'longlink') this.longLink = text(content, 0, content.length);
    else if (kind === 'pax') this.pax = { ...this.pax, ...definedOnly(paxOverrides(content)) };
    else if (kind === 'entry') this.onContent(this.entry!, content);
  }
}
