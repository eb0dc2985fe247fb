/**
 * The test VM image in a test daemon: built and imported by `corrald image vm` (the project's
 * own builder), or, where a developer points CORRAL_TEST_VM_IMAGE at a directory holding
 * `meta.tar.gz` and `rootfs.img`, those files. Tests skip with the reason when neither is there.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { corrald, nodeFlags, type Daemon } from './daemon.js';
import { lxc } from './clients.js';

export const hasQemu = () => spawnSync('qemu-system-x86_64', ['--version']).status === 0;

/** Why VM tests cannot run here, or undefined when they can. */
export function vmSkipReason(): string | undefined {
  if (!hasQemu()) return 'qemu-system-x86_64 is not installed';
  if (process.env.CORRAL_TEST_VM_IMAGE) return undefined;
  const help = spawnSync(process.execPath, [...nodeFlags, corrald, 'image', '--help'], { encoding: 'utf8' });
  if (!/\bvm\b/.test(`${help.stdout}${help.stderr}`)) return 'this build has no test VM image builder (corrald image vm)';
  return undefined;
}

/** Imports the test VM image into `d` under `alias`. */
export async function importVmImage(d: Daemon, alias: string): Promise<void> {
  const given = process.env.CORRAL_TEST_VM_IMAGE;
  if (given) {
    const r = await lxc(d.socket, 'image', 'import', path.join(given, 'meta.tar.gz'), path.join(given, 'rootfs.img'), '--alias', alias);
    if (r.status !== 0) throw new Error(`importing the VM image failed: ${r.stderr}`);
    return;
  }
  const r = spawnSync(process.execPath, [...nodeFlags, corrald, 'image', 'vm', '--dir', d.dir, '--alias', alias], { encoding: 'utf8', timeout: 600_000 });
  if (r.status !== 0) throw new Error(`corrald image vm failed: ${r.stderr || r.stdout}`);
  if (!existsSync(d.socket)) throw new Error('the daemon went away');
}
