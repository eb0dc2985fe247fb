/**
 * How unpack progress is measured without the image passing through the daemon: the read offset
 * of whichever process of the tool's tree has the file open (tar hands a compressed archive to its
 * decompressor). Extraction with a listener keeps tar's own answers: padding it leaves unread after
 * the end of the archive is fine, a damaged archive fails with tar's reason.
 */
import test from 'ava';
import bunyan from 'bunyan';
import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createHostTools } from '../../kernel/host-tools/host-tools.js';
import { extractTar } from '../../plugins/images/tarball.js';
import { followReads, readPosition } from '../../plugins/images/read-position.js';
import { waitFor } from '../helpers/daemon.js';

const tools = createHostTools(bunyan.createLogger({ name: 'unpack-reads-test', level: 'fatal' }));
let work: string;

test.before(() => {
  work = mkdtempSync(path.join(tmpdir(), 'corral-unpack-reads-'));
  mkdirSync(path.join(work, 'src'));
  writeFileSync(path.join(work, 'src', 'data.bin'), randomBytes(3 << 20));
});

test.after.always(() => rmSync(work, { recursive: true, force: true }));

const fresh = (name: string) => {
  const dir = path.join(work, name);
  mkdirSync(dir);
  return dir;
};

test.serial('the read offset is found in a child of the process, and followed as it moves', async (t) => {
  const file = path.join(work, 'src', 'data.bin');
  // The outer shell does not hold the file; its child reads 7000 bytes of it, then waits.
  const holder = spawn('sh', ['-c', `sh -c 'exec 3<"${file}"; dd bs=1000 count=7 of=/dev/null <&3 2>/dev/null; sleep 30'; true`], { stdio: 'ignore' });
  t.teardown(() => {
    spawn('pkill', ['-P', String(holder.pid)]);
    holder.kill();
  });
  let read = 0;
  const stop = followReads(holder.pid!, file, (n) => (read += n));
  await waitFor(async () => (await readPosition(holder.pid!, file)) === 7000, 10_000, 'the child to read');
  await waitFor(() => read === 7000, 10_000, 'the follower to see it');
  stop();
  t.is(await readPosition(holder.pid!, path.join(work, 'elsewhere')), undefined, 'a file nobody has open');
  t.is(await readPosition(2 ** 22 + 1, file), undefined, 'a process that does not exist');
});

test.serial('a gzip tarball extracted with a listener: whole, and never more counted than the file holds', async (t) => {
  const file = path.join(work, 'a.tar.gz');
  execFileSync('tar', ['-c', '-z', '-f', file, '-C', path.join(work, 'src'), 'data.bin']);
  let read = 0;
  const out = fresh('out-gz');
  await extractTar(tools, file, 'gzip', out, (n) => (read += n));
  t.true(read <= statSync(file).size);
  t.deepEqual(readFileSync(path.join(out, 'data.bin')), readFileSync(path.join(work, 'src', 'data.bin')));
});

test.serial('an uncompressed tarball with padding after its end, and a damaged one, with a listener', async (t) => {
  const file = path.join(work, 'padded.tar');
  execFileSync('tar', ['-c', '-f', file, '-C', path.join(work, 'src'), 'data.bin']);
  appendFileSync(file, Buffer.alloc(4 << 20));
  const out = fresh('out-padded');
  await extractTar(tools, file, 'none', out, () => {});
  t.is(statSync(path.join(out, 'data.bin')).size, 3 << 20);
  const junk = path.join(work, 'junk.tar.gz');
  writeFileSync(junk, randomBytes(4096));
  await t.throwsAsync(extractTar(tools, junk, 'gzip', fresh('out-junk'), () => {}), { message: /^tar failed \(exit 2\): .*not in gzip format/ });
});
