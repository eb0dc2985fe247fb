/**
 * Feeding an image tarball to tar through a counting pipe (how unpack progress is measured): every
 * byte is counted, padding tar leaves unread after the end-of-archive blocks is no failure, and a
 * file that cannot be read or an archive tar refuses are named as such.
 */
import test from 'ava';
import bunyan from 'bunyan';
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createHostTools } from '../../kernel/host-tools/host-tools.js';
import { extractTar } from '../../plugins/images/tarball.js';

const tools = createHostTools(bunyan.createLogger({ name: 'unpack-stream-test', level: 'fatal' }));
let work: string;

test.before(() => {
  work = mkdtempSync(path.join(tmpdir(), 'corral-unpack-stream-'));
  mkdirSync(path.join(work, 'src'));
  writeFileSync(path.join(work, 'src', 'data.bin'), randomBytes(3 << 20));
});

test.after.always(() => rmSync(work, { recursive: true, force: true }));

const fresh = (name: string) => {
  const dir = path.join(work, name);
  mkdirSync(dir);
  return dir;
};

test('a gzip tarball: extracted whole, every compressed byte counted', async (t) => {
  const file = path.join(work, 'a.tar.gz');
  execFileSync('tar', ['-c', '-z', '-f', file, '-C', path.join(work, 'src'), 'data.bin']);
  let read = 0;
  const out = fresh('out-gz');
  await extractTar(tools, file, 'gzip', out, (n) => (read += n));
  t.is(read, statSync(file).size);
  t.deepEqual(readFileSync(path.join(out, 'data.bin')), readFileSync(path.join(work, 'src', 'data.bin')));
});

test('an uncompressed tarball with padding after its end: tar stops early, and that is no failure', async (t) => {
  const file = path.join(work, 'padded.tar');
  execFileSync('tar', ['-c', '-f', file, '-C', path.join(work, 'src'), 'data.bin']);
  appendFileSync(file, Buffer.alloc(4 << 20));
  const out = fresh('out-padded');
  await extractTar(tools, file, 'none', out, () => {});
  t.is(statSync(path.join(out, 'data.bin')).size, 3 << 20);
});

test('a file that cannot be read, and one that is no archive, fail with what went wrong', async (t) => {
  await t.throwsAsync(extractTar(tools, path.join(work, 'missing.tar'), 'none', fresh('out-missing'), () => {}), { message: /^Reading .*missing\.tar failed: ENOENT/ });
  const junk = path.join(work, 'junk.tar.gz');
  writeFileSync(junk, randomBytes(4096));
  await t.throwsAsync(extractTar(tools, junk, 'gzip', fresh('out-junk'), () => {}), { message: /^tar failed \(exit 2\): .*not in gzip format/ });
});
