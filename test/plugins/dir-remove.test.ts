/** Removing inside a dir pool: an empty directory, or one holding only empty ones, goes without a child process; anything else through rm, as before. */
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import bunyan from 'bunyan';
import { createHostTools } from '../../kernel/host-tools/host-tools.js';
import { removeAllInside } from '../../plugins/storage-dir/remove.js';

const runs: { command?: string }[] = [];
const log = bunyan.createLogger({ name: 'test', streams: [{ level: 'debug', type: 'raw', stream: { write: (r: object) => runs.push(r as never) } as never }] });
const tools = createHostTools(log);
const rmRuns = () => runs.filter((r) => r.command === 'rm').length;

test('an empty directory, or one of empty directories, is removed without rm; a full one, a file and a symlink as before', async (t) => {
  const root = mkdtempSync(path.join(tmpdir(), 'corral-dir-remove-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const parent = path.join(root, 'containers');
  mkdirSync(path.join(parent, 'empty'), { recursive: true });
  mkdirSync(path.join(parent, 'hollow', 'rootfs'), { recursive: true });
  mkdirSync(path.join(parent, 'full', 'rootfs', 'etc'), { recursive: true });
  writeFileSync(path.join(parent, 'full', 'rootfs', 'etc', 'hostname'), 'c1\n');
  writeFileSync(path.join(parent, 'file'), 'x');
  const outside = mkdtempSync(path.join(tmpdir(), 'corral-dir-remove-outside-'));
  t.teardown(() => rmSync(outside, { recursive: true, force: true }));
  writeFileSync(path.join(outside, 'keep'), 'keep');
  symlinkSync(outside, path.join(parent, 'link'));

  await removeAllInside(tools, root, [{ parent, entry: 'empty' }, { parent, entry: 'hollow' }, { parent, entry: 'absent' }]);
  t.false(existsSync(path.join(parent, 'empty')));
  t.false(existsSync(path.join(parent, 'hollow')), 'a volume holding only an empty rootfs');
  t.is(rmRuns(), 0, 'no child process for an empty directory or a missing entry');

  await removeAllInside(tools, root, [{ parent, entry: 'full' }, { parent, entry: 'file' }, { parent, entry: 'link' }]);
  t.false(existsSync(path.join(parent, 'full')));
  t.false(existsSync(path.join(parent, 'file')));
  t.false(existsSync(path.join(parent, 'link')));
  t.true(existsSync(path.join(outside, 'keep')), 'a symlink is unlinked, never followed');
  t.is(rmRuns(), 1, 'one rm for the tree');
});
