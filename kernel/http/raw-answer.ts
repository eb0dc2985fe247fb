/** An error envelope written straight to a socket, for answers made below hapi (parse errors, refused upgrades). */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorStatus } from '../../sdk/index.js';
import { errorBody } from './envelope.js';

export function rawErrorAnswer(status: ErrorStatus, message: string): string {
  const body = errorBody(status, message);
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/** Answer and close; a socket that can no longer be written is only destroyed. */
export function endWithError(socket: Duplex, status: ErrorStatus, message: string): void {
  if (socket.writable && !socket.destroyed) socket.end(rawErrorAnswer(status, message));
  else socket.destroy();
}
