/**
 * The run directory of a VM, `<dataDir>/qemu/<volume name>/`: its sockets (QMP, agent, serial
 * console), QEMU's pid file, the generated config, the kernel and initrd of a direct-kernel boot
 * and the config drive. Unix socket paths are limited to 107 bytes: when the readable name would
 * pass that, the directory is named by a hash of it instead.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';

const SOCKET_PATH_MAX = 107;
const LONGEST_SOCKET = 'console.sock';

export const volumeName = (project: string, name: string) => (project === 'default' ? name : `${project}_${name}`);

export class RunDir {
  readonly dir: string;

  constructor(root: string, readonly key: string) {
    const readable = path.join(root, key);
    this.dir = path.join(readable, LONGEST_SOCKET).length <= SOCKET_PATH_MAX
      ? readable
      : path.join(root, `~${createHash('sha256').update(key).digest('hex').slice(0, 16)}`);
  }

  /** The run directory at `dir` as found on disk (the boot cleanup walks them). */
  static found(dir: string): RunDir {
    const run = new RunDir(path.dirname(dir), path.basename(dir));
    // A hashed name is already short: the path is the one found.
    (run as { dir: string }).dir = dir;
    return run;
  }

  private at(name: string): string {
    return path.join(this.dir, name);
  }

  get qmpSocket(): string { return this.at('qmp.sock'); }
  get agentSocket(): string { return this.at('agent.sock'); }
  get consoleSocket(): string { return this.at('console.sock'); }
  /** The SPICE server of the VGA console. */
  get spiceSocket(): string { return this.at('spice.sock'); }
  get pidFile(): string { return this.at('qemu.pid'); }
  get configFile(): string { return this.at('qemu.conf'); }
  get kernel(): string { return this.at('kernel'); }
  get initrd(): string { return this.at('initrd'); }
  get configDrive(): string { return this.at('config'); }
  /** What the kernel and initrd copies were read from (see boot-files.ts). */
  get bootSignature(): string { return this.at('boot.sig'); }
  /** Present from the spawn until the start completed: a crash in between leaves it (see cleanup). */
  get startingMarker(): string { return this.at('starting'); }
  /** The tap devices made for the VM's NICs (JSON), so that a stop after a daemon restart removes them. */
  get tapsFile(): string { return this.at('taps.json'); }
  /** The accelerator the VM was started with. */
  get acceleratorFile(): string { return this.at('accelerator'); }
}

/** The root of every VM's run directory. */
export const runRoot = (dataDir: string) => path.join(dataDir, 'qemu');
