/**
 * macvlan NICs of VMs become macvtap interfaces: a macvlan on the parent link whose traffic a
 * character device (/dev/tap<ifindex>) carries. QEMU cannot open that device by interface name,
 * only take an open descriptor, and Node cannot pass descriptors over a unix socket; so QEMU's
 * own way of getting a tap from a helper program is used (`-netdev tap,helper=...`, QMP
 * `netdev_add` with `helper`): QEMU runs the helper with one end of a socket pair and receives
 * the descriptor the helper opened (SCM_RIGHTS). The helper is a few lines of python3 (a host
 * tool the daemon already needs), written to the VM's run directory. See decision 0053.
 */
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, randomHex } from '../../sdk/index.js';

/** QEMU appends `--use-vnet --fd=N --br=B`: the helper opens the device and sends it on fd N. */
const HELPER = `import os, socket, sys
device = sys.argv[1]
fd = int(next(a for a in sys.argv[2:] if a.startswith('--fd='))[5:])
channel = socket.socket(fileno=fd)
socket.send_fds(channel, [b'\\0'], [os.open(device, os.O_RDWR)])
`;

export const HELPER_FILE = 'tap-fd.py';
const MODES = new Set(['bridge', 'vepa', 'private', 'passthru']);

/** A fresh host name for a macvtap (at most 15 characters). */
export const macvtapName = () => `mvt${randomHex(4)}`;

export function checkMode(device: string, mode: string | undefined): string {
  const m = mode || 'bridge';
  if (!MODES.has(m)) throw badRequest(`Device "${device}": invalid macvlan mode "${m}"`);
  return m;
}

/** The character device of a macvtap interface (the kernel names it after the interface's index). */
export function macvtapDevice(name: string): string {
  const index = readFileSync(`/sys/class/net/${name}/ifindex`, 'utf8').trim();
  const dev = `/dev/tap${index}`;
  if (!existsSync(dev)) throw new Error(`the macvtap device ${dev} of ${name} does not exist (is devtmpfs mounted on /dev?)`);
  return dev;
}

/** Writes the helper into the run directory; resolves with the command QEMU runs for `name`'s descriptor. */
export async function helperCommand(runDir: string, name: string): Promise<string> {
  const script = path.join(runDir, HELPER_FILE);
  await writeFile(script, HELPER, { mode: 0o700 });
  return `python3 ${script} ${macvtapDevice(name)}`;
}
