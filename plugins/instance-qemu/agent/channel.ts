/**
 * What a request on one agent channel sees of the connection: the frames addressed to it, a way
 * to send, and the credit frame both directions use.
 */
import type { Frame } from './frames.js';
import type { FrameType, StreamId } from './protocol.js';

/** What a channel does with the frames addressed to it. */
export interface ChannelHandler {
  frame(frame: Frame): void;
  /** The connection is gone: end everything with this error. */
  fail(error: Error): void;
}

/** What sessions and transfers use of their connection. */
export interface AgentLink {
  send(channel: number, type: FrameType, ...parts: Buffer[]): void;
  /** Resolves once the socket has room (at once when it has). */
  drained(): Promise<void>;
  release(channel: number): void;
}

export function creditFrame(stream: StreamId, bytes: number): Buffer {
  const payload = Buffer.alloc(5);
  payload.writeUInt8(stream, 0);
  payload.writeUInt32BE(bytes, 1);
  return payload;
}

