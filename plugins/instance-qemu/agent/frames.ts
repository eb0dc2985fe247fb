/**
 * Frames to and from bytes. Until the agent's greeting (carrying our nonce) has been seen, the
 * reader hunts for it and drops everything before: a reconnection may start in the middle of a
 * frame the agent wrote for the previous connection.
 */
import { FRAME_HEADER_LEN, FrameType, HELLO_MAGIC, HELLO_PAYLOAD_LEN, MAX_PAYLOAD } from './protocol.js';

export interface Frame {
  channel: number;
  type: FrameType;
  payload: Buffer;
}

export function encodeFrame(channel: number, type: FrameType, ...parts: Buffer[]): Buffer {
  const length = parts.reduce((sum, part) => sum + part.length, 0);
  const header = Buffer.alloc(FRAME_HEADER_LEN);
  header.writeUInt32BE(length, 0);
  header.writeUInt32BE(channel, 4);
  header.writeUInt8(type, 8);
  return Buffer.concat([header, ...parts]);
}

export function helloPayload(version: number, nonce: number): Buffer {
  const payload = Buffer.alloc(HELLO_PAYLOAD_LEN);
  HELLO_MAGIC.copy(payload);
  payload.writeUInt16BE(version, HELLO_MAGIC.length);
  payload.writeUInt32BE(nonce, HELLO_MAGIC.length + 2);
  return payload;
}

export class ProtocolError extends Error {}

export class FrameReader {
  private pending: Buffer = Buffer.alloc(0);
  private awaiting: Buffer | undefined;

  /** Drop everything up to the agent's greeting answering `nonce`. */
  expectHello(nonce: number): void {
    this.awaiting = encodeFrame(0, FrameType.Hello, helloPayload(0, nonce));
  }

  /** Whole frames in `chunk` (and what came before); throws ProtocolError on a frame that makes no sense. */
  push(chunk: Buffer): Frame[] {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    const frames: Frame[] = [];
    for (;;) {
      if (this.awaiting && !this.hunt(this.awaiting)) break;
      if (this.pending.length < FRAME_HEADER_LEN) break;
      const length = this.pending.readUInt32BE(0);
      const type = this.pending.readUInt8(8);
      if (length > MAX_PAYLOAD || type < FrameType.Hello || type > FrameType.Reset) {
        throw new ProtocolError(`the agent sent a bad frame (type ${type}, ${length} bytes)`);
      }
      if (this.pending.length < FRAME_HEADER_LEN + length) break;
      frames.push({
        channel: this.pending.readUInt32BE(4),
        type,
        payload: this.pending.subarray(FRAME_HEADER_LEN, FRAME_HEADER_LEN + length),
      });
      this.pending = this.pending.subarray(FRAME_HEADER_LEN + length);
    }
    return frames;
  }

  /**
   * Looks for the greeting: the fixed header and magic, then our nonce (the version is read by
   * the caller). Returns true once found (the greeting is then the next frame).
   */
  private hunt(expected: Buffer): boolean {
    const fixed = expected.subarray(0, FRAME_HEADER_LEN + HELLO_MAGIC.length);
    const nonce = expected.subarray(expected.length - 4);
    for (;;) {
      const at = this.pending.indexOf(fixed);
      if (at < 0) {
        // Keep a tail that may be the start of the greeting.
        this.pending = this.pending.subarray(Math.max(0, this.pending.length - fixed.length + 1));
        return false;
      }
      this.pending = this.pending.subarray(at);
      if (this.pending.length < expected.length) return false;
      if (this.pending.subarray(expected.length - 4, expected.length).equals(nonce)) {
        this.awaiting = undefined;
        return true;
      }
      // An answer to an earlier greeting: skip it.
      this.pending = this.pending.subarray(1);
    }
  }
}
