/**
 * A command's output stream relayed to a session socket as binary messages. The stream pauses while
 * the client is slow to read (the daemon does not hold unbounded output for it) and is drained
 * unread once nobody listens (the command is never blocked by a socket that went away).
 */
import type { Readable } from 'node:stream';
import type { WebSocket } from 'ws';

/** Output the daemon holds for one socket before it stops reading the command. */
const HIGH_WATER_BYTES = 1 << 20;

export class SocketOutput {
  /** Settles when the stream ends or fails. */
  readonly ended: Promise<void>;
  private held = false;

  constructor(private readonly from: Readable, private readonly to: WebSocket | undefined) {
    this.ended = new Promise((resolve) => {
      from.once('end', resolve);
      from.once('close', resolve);
      from.once('error', resolve);
    });
    from.on('data', (chunk: Buffer) => this.send(chunk));
    to?.once('close', () => this.release());
  }

  private send(chunk: Buffer): void {
    const to = this.to;
    if (!to || to.readyState !== to.OPEN) return;
    to.send(chunk, { binary: true }, () => {
      if (this.held && to.bufferedAmount < HIGH_WATER_BYTES / 2) this.release();
    });
    if (to.bufferedAmount > HIGH_WATER_BYTES && !this.held) {
      this.held = true;
      this.from.pause();
    }
  }

  private release(): void {
    this.held = false;
    this.from.resume();
  }

  /**
   * Once the command exited: resolves when the stream ends, or once it has been quiet for `quietMs`
   * with nothing held back (a process the command left behind may keep it open for ever).
   */
  settle(quietMs: number): Promise<void> {
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(timer);
        this.from.off('data', arm);
        resolve();
      };
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => (this.held ? arm() : done()), quietMs);
      };
      this.from.on('data', arm);
      void this.ended.then(done);
      arm();
    });
  }
}
