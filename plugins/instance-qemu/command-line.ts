/**
 * QEMU's command line for a VM: what its config file format cannot say. Paused at start (`-S`:
 * the driver resumes it once it holds the QMP link), daemonized with a pid file (it outlives the
 * daemon), the generated config, the direct kernel when there is one, then `raw.qemu` last so
 * that the user's options win where QEMU lets a later option override an earlier one.
 */
import { existsSync } from 'node:fs';
import type { BootFiles } from './boot-files.js';
import type { Accelerator } from './probe.js';
import type { RunDir } from './run-dir.js';

const QBOOT = '/usr/share/qemu/qboot.rom';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface CommandLineSpec {
  run: RunDir;
  name: string;
  accelerator: Accelerator;
  uuid?: string;
  boot?: BootFiles;
  rawArgs: string[];
}

export function commandLine(spec: CommandLineSpec): string[] {
  const { run, boot } = spec;
  return [
    '-S', '-name', spec.name, '-nodefaults', '-no-user-config', '-display', 'none', '-daemonize', '-pidfile', run.pidFile,
    '-readconfig', run.configFile,
    // Under KVM the guest sees the host's CPU; TCG emulates QEMU's default model (cheaper than `max`).
    ...(spec.accelerator === 'kvm' ? ['-cpu', 'host'] : []),
    ...(spec.uuid && UUID.test(spec.uuid) ? ['-uuid', spec.uuid] : []),
    // qboot: a minimal BIOS that only loads the given kernel (no option ROM scan); SeaBIOS without it.
    ...(boot ? [
      ...(existsSync(QBOOT) ? ['-bios', 'qboot.rom'] : []),
      '-kernel', boot.kernel, ...(boot.initrd ? ['-initrd', boot.initrd] : []), '-append', 'root=/dev/vda rw console=ttyS0',
    ] : []),
    ...spec.rawArgs,
  ];
}
