/**
 * The VGA console of a VM: a display card whose screen QEMU serves through SPICE on a unix
 * socket of the run directory (no TCP port: only the daemon reaches it, and relays it over the
 * console operation's websocket). No password: the socket's directory is the daemon's alone.
 */
import { section, type ConfigSection } from './qemu-config.js';
import { connectQemuSocket } from './unix-connect.js';

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
export const connectSpice = (socketPath: string) => connectQemuSocket(socketPath, 'graphical console');
