/**
 * A connection to one of QEMU's sockets in a VM's run directory (the serial console, the SPICE
 * server), or a 400 naming `what` when it does not answer within 5 s.
 */
import net from 'node:net';
import { badRequest } from '../../sdk/index.js';

const CONNECT_MS = 5_000;

export async function connectQemuSocket(socketPath: string, what: string): Promise<net.Socket> {
  const socket = net.connect(socketPath);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(badRequest(`The ${what} did not answer`));
    }, CONNECT_MS);
    socket.once('connect', () => { clearTimeout(timer); resolve(); });
    socket.once('error', (err) => { clearTimeout(timer); reject(badRequest(`The ${what} is not available: ${err.message}`)); });
  });
  return socket;
}
