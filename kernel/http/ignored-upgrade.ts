/**
 * An `Upgrade` to anything but a websocket (curl --http2 asks for h2c on every plain request) is
 * ignored, as HTTP allows and the reference does: node has already handed the socket over as an
 * upgrade, so the request is given back to the listener's ordinary handler with a response of its
 * own, and the connection closes after that one answer.
 */
import { ServerResponse, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { endWithError } from './raw-answer.js';

export function isWebsocketUpgrade(raw: IncomingMessage): boolean {
  return (raw.headers.upgrade ?? '').toLowerCase() === 'websocket';
}

export function serveIgnoringUpgrade(listener: Server, raw: IncomingMessage, socket: Duplex, head: Buffer): void {
  // Node stops parsing at the headers of an upgrade: a body would be lost, so such a request is refused.
  const length = raw.headers['content-length'];
  if ((length !== undefined && length !== '0') || raw.headers['transfer-encoding'] !== undefined) {
    return endWithError(socket, 400, `A request with a body cannot ask for a protocol upgrade (Upgrade: ${raw.headers.upgrade})`);
  }
  if (head.length) socket.unshift(head);
  const res = new ServerResponse(raw);
  res.shouldKeepAlive = false;
  res.assignSocket(socket as Socket);
  res.on('finish', () => {
    res.detachSocket(socket as Socket);
    socket.end();
  });
  listener.emit('request', raw, res);
}
