/**
 * The busybox image made heavy: its rootfs also holds a file of random bytes (which no compressor
 * shrinks), packed as an uncompressed unified tarball, for measuring transfers of a known size.
 */
import { execFileSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { writeBusyboxTree } from '../../bin/images/busybox.js';

export interface LargeImage {
  /** The unified tarball. */
  file: string;
  /** Its size in bytes. */
  size: number;
  /** Directory holding it; remove it when done. */
  dir: string;
}

const CHUNK = 1_000_000;

export function buildLargeImage(megabytes: number): LargeImage {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-large-image-'));
  const tree = path.join(dir, 'tree');
  writeBusyboxTree(tree);
  const fd = openSync(path.join(tree, 'rootfs', 'random.bin'), 'w');
  const chunk = Buffer.alloc(CHUNK);
  try {
    for (let i = 0; i < megabytes; i++) writeSync(fd, randomFillSync(chunk));
  } finally {
    closeSync(fd);
  }
  const file = path.join(dir, 'large.tar');
  execFileSync('tar', ['-c', '--numeric-owner', '-f', file, '-C', tree, 'metadata.yaml', 'templates', 'rootfs']);
  rmSync(tree, { recursive: true, force: true });
  return { file, size: statSync(file).size, dir };
}
