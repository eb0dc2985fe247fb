/**
 * The serial console (ttyS0) of a VM: QEMU serves it on a unix socket of the run directory and
 * writes everything the guest prints to the console log as well. One client at a time, as a
 * serial line has one end.
 */
import net from 'node:net';
import { PassThrough } from 'node:stream';
import { badRequest, type ConsoleSession } from '../../sdk/index.js';

const CONNECT_MS = 5_000;

export async function consoleSession(socketPath: string): Promise<ConsoleSession> {
  const socket = net.connect(socketPath);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(badRequest('The console did not answer'));
    }, CONNECT_MS);
    socket.once('connect', () => { clearTimeout(timer); resolve(); });
    socket.once('error', (err) => { clearTimeout(timer); reject(badRequest(`The console is not available: ${err.message}`)); });
  });
  const output = new PassThrough();
  socket.pipe(output);
  socket.on('error', () => output.end());
  return {
    input: socket,
    output,
    // A serial line has no window size.
    resize() {},
    close() {
      socket.destroy();
      output.end();
    },
  };
}
