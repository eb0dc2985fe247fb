/**
 * What a client sends on one session socket, kept from the moment the socket opens: lxc and pylxd
 * send stdin, and its end, right after opening it, before the session is ready to read. End of
 * input is an empty text message (what lxc and pylxd send) or the socket closing.
 */
import { Writable } from 'node:stream';
import type { WebSocket } from 'ws';

/** Input kept while nobody reads it; past this the socket stops reading (the client waits). */
const MAX_QUEUED_BYTES = 1 << 20;

export class SocketInput {
  private readonly queue: Buffer[] = [];
  private queued = 0;
  private ended = false;
  private endDelivered = false;
  private into?: Writable;
  private onEnd?: () => void;
  private pausedWhileQueued = false;
  private waitingForDrain = false;

  constructor(private readonly socket: WebSocket) {
    socket.on('message', (data, isBinary) => {
      const chunk = toBuffer(data);
      if (!isBinary && chunk.length === 0) this.end();
      else this.push(chunk);
    });
    socket.once('close', () => this.end());
  }

  /** Write what came and what comes into `into` (the socket pauses while it is full); `onEnd` runs once, at end of input. */
  pipe(into: Writable, onEnd: () => void): void {
    this.into = into;
    this.onEnd = onEnd;
    for (const chunk of this.queue.splice(0)) this.write(chunk);
    this.queued = 0;
    if (this.pausedWhileQueued && !this.waitingForDrain) this.socket.resume();
    this.pausedWhileQueued = false;
    if (this.ended) this.deliverEnd();
  }

  /** Nobody reads this socket (stdout, stderr): what the client sends on it is dropped. */
  discard(): void {
    this.pipe(new Writable({ write: (_chunk, _enc, done) => done() }), () => undefined);
  }

  private push(chunk: Buffer): void {
    if (this.ended || chunk.length === 0) return;
    if (this.into) return this.write(chunk);
    this.queue.push(chunk);
    this.queued += chunk.length;
    if (this.queued > MAX_QUEUED_BYTES && !this.pausedWhileQueued) {
      this.pausedWhileQueued = true;
      this.socket.pause();
    }
  }

  private write(chunk: Buffer): void {
    const into = this.into!;
    if (into.writableEnded || into.destroyed) return;
    if (!into.write(chunk) && !this.waitingForDrain) {
      this.waitingForDrain = true;
      this.socket.pause();
      into.once('drain', () => {
        this.waitingForDrain = false;
        this.socket.resume();
      });
    }
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.into) this.deliverEnd();
  }

  private deliverEnd(): void {
    if (this.endDelivered) return;
    this.endDelivered = true;
    this.onEnd?.();
  }
}

function toBuffer(data: Buffer | ArrayBuffer | Buffer[]): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}
