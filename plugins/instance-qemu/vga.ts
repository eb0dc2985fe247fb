/**
 * The VGA console of a VM: a display card whose screen QEMU serves through SPICE on a unix
 * socket of the run directory (no TCP port: only the daemon reaches it, and relays it over the
 * console operation's websocket). No password: the socket's directory is the daemon's alone.
 */
import net from 'node:net';
import { badRequest } from '../../sdk/index.js';
import { section, type ConfigSection } from './qemu-config.js';

const CONNECT_MS = 5_000;

/**
 * The display card: virtio-vga where firmware boots the VM; under a directly loaded kernel
 * bochs-display, which has no legacy VGA ROM: qboot resets the guest in a loop when a VGA card and
 * a TPM (tpm-crb) are both there (virtio-vga, VGA and qxl-vga all do; bochs-display does not).
 */
export type DisplayCard = 'virtio-vga' | 'bochs-display';

export function vgaSections(spiceSocket: string, card: DisplayCard = 'virtio-vga'): ConfigSection[] {
  return [
    section('spice', undefined, { unix: 'on', addr: spiceSocket, 'disable-ticketing': 'on' }),
    section('device', 'vga', { driver: card }),
  ];
}

/** A new connection to the SPICE server, or a 400 when it does not answer in time. */
export async function connectSpice(socketPath: string): Promise<net.Socket> {
  const socket = net.connect(socketPath);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(badRequest('The graphical console did not answer'));
    }, CONNECT_MS);
    socket.once('connect', () => { clearTimeout(timer); resolve(); });
    socket.once('error', (err) => { clearTimeout(timer); reject(badRequest(`The graphical console is not available: ${err.message}`)); });
  });
  return socket;
}
