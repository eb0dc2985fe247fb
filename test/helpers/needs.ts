/**
 * Tests that need a host tool are decided at load time: with the tool they are ordinary serial
 * tests, without it ava lists them as skipped, the reason in the title and on stderr, rather than
 * passing having checked nothing.
 */
import test, { type Implementation } from 'ava';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { hasLxc } from './clients.js';

export type SerialTest = (title: string, implementation: Implementation<[]>) => void;

/** `test.serial` when `missing` is undefined; otherwise a skip that says why. */
export function serialUnless(missing: string | undefined): SerialTest {
  if (missing === undefined) return (title, implementation) => test.serial(title, implementation);
  console.warn(`Skipping tests: ${missing}`);
  return (title, implementation) => test.skip(`${title} (skipped: ${missing})`, implementation);
}

/** Serial tests that drive the `lxc` client. */
export const withLxcClient = (): SerialTest => serialUnless(hasLxc() ? undefined : 'the lxc client is not installed');

/** Whether this host mounts overlayfs (what layered `dir` volumes need), tried once in a scratch directory. */
export function overlayMounts(): boolean {
  const probe = mkdtempSync(path.join(tmpdir(), 'corral-ovl-probe-'));
  try {
    for (const p of ['l', 'u', 'w', 'm']) mkdirSync(path.join(probe, p));
    const res = spawnSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${probe}/l,upperdir=${probe}/u,workdir=${probe}/w`, `${probe}/m`]);
    if (res.status === 0) spawnSync('umount', [`${probe}/m`]);
    return res.status === 0;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}
