/**
 * Per-stream flow control, host side: what the agent sends is read into a Readable that grants the
 * agent more only as its consumer reads; what we send waits for the agent's credit and for the
 * socket to drain, so neither side buffers without bound.
 */
import { Readable, Writable } from 'node:stream';
import { MAX_CHUNK, STREAM_WINDOW } from './protocol.js';

/** A stream from the agent; `grant` gives the agent back the bytes our consumer has taken. */
export class IncomingStream extends Readable {
  private unacknowledged = 0;

  constructor(private readonly grant: (bytes: number) => void) {
    super({ highWaterMark: 64 * 1024 });
  }

  deliver(chunk: Buffer): void {
    this.unacknowledged += chunk.length;
    // A copy: the frame's bytes belong to the reader's buffer.
    this.push(Buffer.from(chunk));
  }

  finish(): void {
    this.push(null);
  }

  override _read(): void {
    if (!this.unacknowledged) return;
    const bytes = this.unacknowledged;
    this.unacknowledged = 0;
    this.grant(bytes);
  }
}

/** How much we may still send on one stream. */
export class CreditWindow {
  private credit = STREAM_WINDOW;
  private waiters: (() => void)[] = [];
  private failure: Error | undefined;

  add(bytes: number): void {
    this.credit += bytes;
    this.wake();
  }

  fail(error: Error): void {
    this.failure ??= error;
    this.wake();
  }

  /** Resolves with up to `wanted` bytes of credit (at least one), taken. */
  async take(wanted: number): Promise<number> {
    while (this.credit <= 0) {
      if (this.failure) throw this.failure;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    if (this.failure) throw this.failure;
    const granted = Math.min(wanted, this.credit, MAX_CHUNK);
    this.credit -= granted;
    return granted;
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}

export interface StreamSink {
  /** Sends one chunk; resolves once the socket has room again. */
  data(chunk: Buffer): Promise<void>;
  end(): void;
}

/**
 * A Writable that sends to the agent within its credit. Once the channel is gone (the command
 * exited), further input is dropped, as a pipe nobody reads would.
 */
export function outgoingStream(window: CreditWindow, sink: StreamSink, gone: () => boolean): Writable {
  const send = async (chunk: Buffer): Promise<void> => {
    let at = 0;
    while (at < chunk.length && !gone()) {
      const bytes = await window.take(chunk.length - at);
      await sink.data(chunk.subarray(at, at + bytes));
      at += bytes;
    }
  };
  return new Writable({
    highWaterMark: 64 * 1024,
    write(chunk: Buffer, _encoding, done) {
      send(chunk).then(() => done(), (error: unknown) => done(gone() ? undefined : (error as Error)));
    },
    final(done) {
      if (!gone()) sink.end();
      done();
    },
  });
}
