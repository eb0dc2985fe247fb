/**
 * The serial console (ttyS0) of a VM: QEMU serves it on a unix socket of the run directory and
 * writes everything the guest prints to the console log as well. One client at a time, as a
 * serial line has one end.
 */
import { PassThrough } from 'node:stream';
import type { ConsoleSession } from '../../sdk/index.js';
import { connectQemuSocket } from './unix-connect.js';

export async function consoleSession(socketPath: string): Promise<ConsoleSession> {
  const socket = await connectQemuSocket(socketPath, 'console');
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
