/** The dir driver's snapshot copy: symlink inodes shared, everything else a real copy with its attributes. */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, linkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import bunyan from 'bunyan';
import { createHostTools } from '../../kernel/host-tools/host-tools.js';
import { copyTreeSharingSymlinks } from '../../plugins/storage-dir/tree-copy.js';

test('copyTreeSharingSymlinks shares symlinks only, keeps hard links, owners, modes, times and xattrs', async (t) => {
  const root = mkdtempSync(path.join(tmpdir(), 'corral-treecopy-'));
  try {
    const src = path.join(root, 'src');
    mkdirSync(path.join(src, 'rootfs/etc/deep'), { recursive: true });
    writeFileSync(path.join(src, 'rootfs/etc/a'), 'alpha');
    linkSync(path.join(src, 'rootfs/etc/a'), path.join(src, 'rootfs/etc/a-link'));
    writeFileSync(path.join(src, 'rootfs/etc/deep/b'), 'beta', { mode: 0o640 });
    execFileSync('chown', ['1000123:1000456', path.join(src, 'rootfs/etc/deep/b')]);
    execFileSync('setfattr', ['-n', 'user.note', '-v', 'kept', path.join(src, 'rootfs/etc/deep/b')]);
    symlinkSync('/etc/a', path.join(src, 'rootfs/etc/abs-link'));
    execFileSync('mkfifo', [path.join(src, 'rootfs/fifo')]);
    const old = new Date('2001-02-03T04:05:06Z');
    utimesSync(path.join(src, 'rootfs/etc/deep'), old, old);
    utimesSync(path.join(src, 'rootfs/etc'), old, old);

    const dst = path.join(root, 'dst');
    await copyTreeSharingSymlinks(createHostTools(bunyan.createLogger({ name: 'test', level: 'fatal' })), src, dst);
    const ino = (base: string, rel: string) => lstatSync(path.join(base, rel)).ino;

    t.is(ino(dst, 'rootfs/etc/abs-link'), ino(src, 'rootfs/etc/abs-link'), 'symlink inode shared');
    t.not(ino(dst, 'rootfs/etc/a'), ino(src, 'rootfs/etc/a'), 'regular file copied');
    t.is(ino(dst, 'rootfs/etc/a'), ino(dst, 'rootfs/etc/a-link'), 'hard links inside the copy stay linked');
    t.not(ino(dst, 'rootfs/fifo'), ino(src, 'rootfs/fifo'), 'special files copied');
    const b = lstatSync(path.join(dst, 'rootfs/etc/deep/b'));
    t.is(b.mode & 0o7777, 0o640);
    t.is(b.uid, 1000123);
    t.is(b.gid, 1000456);
    t.is(execFileSync('getfattr', ['--only-values', '-n', 'user.note', path.join(dst, 'rootfs/etc/deep/b')]).toString(), 'kept');
    t.is(lstatSync(path.join(dst, 'rootfs/etc')).mtime.toISOString(), old.toISOString(), 'directory times kept');
    t.is(lstatSync(path.join(dst, 'rootfs/etc/deep')).mtime.toISOString(), old.toISOString());

    writeFileSync(path.join(dst, 'rootfs/etc/a'), 'changed');
    t.is(readFileSync(path.join(src, 'rootfs/etc/a'), 'utf8'), 'alpha', 'writing the copy leaves the source alone');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
