/** The in-process tar walker against GNU tar's own archives: sizes of 8 GiB and more, pax overrides, long names. */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TarWalker, type TarEntry } from '../../sdk/lib/archive/index.js';

const BLOCK = 512;
const EIGHT_GIB = 8 * 1024 ** 3;

function scratch(): string {
  return mkdtempSync(path.join(tmpdir(), 'corral-tarwalk-'));
}

/** The first `bytes` of what GNU tar writes for `member` (tar stops on the closed pipe: the body is never produced). */
function tarHead(dir: string, format: string, member: string, bytes: number): Buffer {
  return execFileSync('sh', ['-c', `tar -C "$1" --format="$2" -cf - "$3" | head -c "$4"`, 'sh', dir, format, member, String(bytes)]);
}

function walk(bytes: Buffer, collect = (_e: TarEntry) => false): { entries: TarEntry[]; contents: Map<string, string>; walker: TarWalker } {
  const entries: TarEntry[] = [];
  const contents = new Map<string, string>();
  const walker = new TarWalker('backup', (e) => {
    entries.push(e);
    return collect(e);
  }, (e, data) => contents.set(e.name, data.toString()));
  for (let i = 0; i < bytes.length; i += 777) walker.push(bytes.subarray(i, i + 777));
  return { entries, contents, walker };
}

/** A ustar header block; `size` is written as given (octal text or raw bytes), the checksum computed. */
function header(name: string, type: string, size: string | Buffer): Buffer {
  const block = Buffer.alloc(BLOCK);
  block.write(name, 0, 'utf8');
  block.write('0000644\0', 100, 'latin1');
  block.write('0000000\0', 108, 'latin1');
  block.write('0000000\0', 116, 'latin1');
  if (typeof size === 'string') block.write(size, 124, 'latin1');
  else size.copy(block, 124);
  block.write('00000000000\0', 136, 'latin1');
  block.write(type, 156, 'latin1');
  block.write('ustar\0' + '00', 257, 'latin1');
  block.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of block) sum += b;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return block;
}

const pad = (data: Buffer) => Buffer.concat([data, Buffer.alloc((BLOCK - (data.length % BLOCK)) % BLOCK)]);

/** A pax extended header member carrying `records` (key, value pairs). */
function pax(records: [string, string][]): Buffer {
  const body = Buffer.concat(records.map(([k, v]) => {
    const tail = Buffer.byteLength(` ${k}=${v}\n`);
    // The length counts its own digits.
    let length = tail + 1;
    while (String(length).length + tail !== length) length = String(length).length + tail;
    return Buffer.from(`${length} ${k}=${v}\n`);
  }));
  return Buffer.concat([header('./PaxHeaders/x', 'x', body.length.toString(8).padStart(11, '0')), pad(body)]);
}

const END = Buffer.alloc(2 * BLOCK);

test('GNU tar --format=posix: a member of 8 GiB or more is read from the pax size record', (t) => {
  const dir = scratch();
  try {
    // A sparse file: nothing of it is written, and tar is stopped after its headers.
    const size = EIGHT_GIB + 4096;
    execFileSync('truncate', ['-s', String(size), path.join(dir, 'big')]);
    const head = tarHead(dir, 'posix', 'big', 3 * BLOCK);
    t.is(head.length, 3 * BLOCK);
    t.regex(head.subarray(BLOCK, 2 * BLOCK).toString('latin1'), new RegExp(` size=${size}\n`), 'GNU tar puts the size in a pax record');
    t.is(head.subarray(2 * BLOCK + 124, 2 * BLOCK + 135).toString('latin1'), '00000000000', '... and 0 in the header');

    const { entries, walker } = walk(head);
    t.deepEqual(entries.map((e) => [e.name, e.type, e.size]), [['big', '0', size]]);
    // The body follows: data blocks are data, not headers (they would fail as a checksum or a number).
    walker.push(Buffer.alloc(64 * 1024, 0x78));
    t.is(walker.members, 1);
    t.throws(() => walker.finish(), { message: /truncated/ }, 'the walker knows the member is not over');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('GNU tar --format=gnu: a size of 8 GiB or more in base-256 is read', (t) => {
  const dir = scratch();
  try {
    execFileSync('truncate', ['-s', String(EIGHT_GIB), path.join(dir, 'big')]);
    const head = tarHead(dir, 'gnu', 'big', BLOCK);
    t.is(head[124]! & 0x80, 0x80, 'GNU tar writes base-256');
    const { entries } = walk(head);
    t.deepEqual(entries.map((e) => e.size), [EIGHT_GIB]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a pax size overrides the header for the next member only, and the archive reads to its end', (t) => {
  const dir = scratch();
  try {
    // What GNU tar writes beyond 8 GiB, at a size a test can carry: size 0 in the header, the real one in pax.
    const data = Buffer.alloc(1000, 0x61);
    const archive = Buffer.concat([
      pax([['size', '1000'], ['path', 'dir/a-long-name-from-pax']]), header('a', '0', '00000000000\0'), pad(data),
      header('b', '0', '00000000003\0'), pad(Buffer.from('bee')),
      END,
    ]);
    // GNU tar agrees on the reading.
    const file = path.join(dir, 'crafted.tar');
    writeFileSync(file, archive);
    t.regex(execFileSync('tar', ['-tvf', file], { encoding: 'utf8' }), /1000 .*dir\/a-long-name-from-pax\n.* 3 .* b\n/);

    const { entries, contents, walker } = walk(archive, (e) => e.name === 'b');
    walker.finish();
    t.deepEqual(entries.map((e) => [e.name, e.size]), [['dir/a-long-name-from-pax', 1000], ['b', 3]]);
    t.is(contents.get('b'), 'bee');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('long names and link targets from GNU tar in every format', (t) => {
  const dir = scratch();
  try {
    const long = `${'d'.repeat(120)}/${'t'.repeat(120)}`;
    execFileSync('mkdir', ['-p', path.join(dir, 'r', 'd'.repeat(120))]);
    writeFileSync(path.join(dir, 'r', long), 'x');
    symlinkSync(`/${long}/and/further`, path.join(dir, 'r', 'link'));
    for (const format of ['posix', 'gnu']) {
      const archive = execFileSync('tar', ['-C', dir, `--format=${format}`, '--sort=name', '-cf', '-', 'r']);
      const { entries, walker } = walk(archive);
      walker.finish();
      t.true(entries.some((e) => e.name === `r/${long}` && e.size === 1), format);
      t.true(entries.some((e) => e.name === 'r/link' && e.type === '2' && e.linkname === `/${long}/and/further`), format);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('unreadable sizes are refused as a damaged archive with a reason, never misread', (t) => {
  const refuse = (archive: Buffer, message: RegExp, why: string) => {
    const err = t.throws(() => walk(archive).walker.finish(), undefined, why);
    t.regex(err!.message, /^Invalid backup: /, why);
    t.regex(err!.message, message, why);
  };
  const negative = Buffer.alloc(12, 0xff);
  refuse(Buffer.concat([header('a', '0', negative), END]), /negative number/, 'negative base-256');
  const huge = Buffer.concat([Buffer.from([0x80]), Buffer.alloc(11, 0xff)]);
  refuse(Buffer.concat([header('a', '0', huge), END]), /too large/, 'base-256 beyond what a number holds');
  refuse(Buffer.concat([header('a', '0', '0000000008x\0'), END]), /unreadable number/, 'not octal');
  refuse(Buffer.concat([pax([['size', '12abc']]), header('a', '0', '00000000000\0'), END]), /unreadable size "12abc"/, 'pax size not decimal');
  refuse(Buffer.concat([pax([['size', '99999999999999999']]), header('a', '0', '00000000000\0'), END]), /size too large/, 'pax size too large');
  const broken = Buffer.concat([header('./PaxHeaders/x', 'x', '00000000010\0'), pad(Buffer.from('99 size=1')), header('a', '0', '00000000000\0'), END]);
  refuse(broken, /malformed record/, 'a record longer than the pax header');
});
