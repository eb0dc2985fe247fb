/**
 * A migration websocket read as the reference's peers use it: binary frames carry bytes (a protobuf
 * message each on the control socket, a byte stream on the fs socket), and an empty text frame is a
 * barrier that ends one stream without closing the socket, so several rsync runs share one socket.
 */
import type { WebSocket } from 'ws';

type Item = { kind: 'data'; bytes: Buffer } | { kind: 'barrier' } | { kind: 'closed'; reason: string };

/** Past this many bytes read but not yet taken, the socket stops reading (a fast peer cannot fill our memory). */
const HIGH_WATER = 16 * 1024 * 1024;
const LOW_WATER = 4 * 1024 * 1024;
/** ws's close code for a frame over its size limit (100 MiB by default, both ways). */
const MESSAGE_TOO_BIG = 1009;

export class MigrationChannel {
  private readonly queue: Item[] = [];
  private wake?: () => void;
  private closedReason?: string;
  private queuedBytes = 0;
  private paused = false;
  /** Bytes received in binary frames so far (progress). */
  received = 0;
  /** When a frame last went either way (a stream idle in both directions is a stalled peer). */
  lastActivity = Date.now();

  constructor(readonly socket: WebSocket, private readonly label: string) {
    socket.on('message', (data, isBinary) => {
      const bytes = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      if (isBinary) this.received += bytes.length;
      this.lastActivity = Date.now();
      this.push(isBinary ? { kind: 'data', bytes } : { kind: 'barrier' });
      if (isBinary) {
        this.queuedBytes += bytes.length;
        if (this.queuedBytes > HIGH_WATER && !this.paused) {
          this.paused = true;
          socket.pause();
        }
      }
    });
    socket.on('close', (code) => this.push({
      kind: 'closed',
      reason: code === MESSAGE_TOO_BIG ? `The peer sent a frame larger than allowed on the ${label} websocket` : `The ${label} websocket closed`,
    }));
    socket.on('error', (err) => this.push({
      kind: 'closed',
      reason: (err as NodeJS.ErrnoException).code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH'
        ? `The peer sent a frame larger than allowed on the ${label} websocket`
        : `The ${label} websocket failed: ${err.message}`,
    }));
  }

  private push(item: Item): void {
    if (this.closedReason) return;
    if (item.kind === 'closed') this.closedReason = item.reason;
    this.queue.push(item);
    this.wake?.();
  }

  /**
   * The next frame; a closed socket stays closed for every later read. With `idleMs`, a wait in which
   * no frame went either way for that long ends as a closed socket (the peer stalled).
   */
  async next(signal?: AbortSignal, idleMs?: number): Promise<Item> {
    for (;;) {
      const item = this.queue[0];
      if (item) {
        if (item.kind !== 'closed') this.queue.shift();
        if (item.kind === 'data') this.taken(item.bytes.length);
        return item;
      }
      if (signal?.aborted) return { kind: 'closed', reason: 'Migration cancelled' };
      if (idleMs !== undefined && Date.now() - this.lastActivity >= idleMs) {
        return { kind: 'closed', reason: `Nothing moved on the ${this.label} websocket for ${idleMs / 1000} s; the peer stalled` };
      }
      let onAbort = () => {};
      let tick: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        onAbort = () => resolve();
        signal?.addEventListener('abort', onAbort, { once: true });
        // Woken to look at the clock again: sending counts as activity too, and it wakes nobody.
        if (idleMs !== undefined) tick = setTimeout(resolve, Math.min(idleMs, 5_000));
      });
      signal?.removeEventListener('abort', onAbort);
      clearTimeout(tick);
      this.wake = undefined;
    }
  }

  private taken(bytes: number): void {
    this.queuedBytes -= bytes;
    if (this.paused && this.queuedBytes < LOW_WATER) {
      this.paused = false;
      this.socket.resume();
    }
  }

  /**
   * One whole binary message (the control socket); throws when the socket closes or sends a barrier
   * instead, or when nothing comes within `timeoutMs` (a peer that stays silent is not waited for forever).
   */
  async message(signal?: AbortSignal, timeoutMs?: number): Promise<Buffer> {
    const timer = timeoutMs ? AbortSignal.timeout(timeoutMs) : undefined;
    const item = await this.next(timer ? (signal ? AbortSignal.any([signal, timer]) : timer) : signal);
    if (timer?.aborted && item.kind === 'closed') throw new Error(`No message from the peer on the ${this.label} websocket within ${timeoutMs! / 1000} s`);
    if (item.kind === 'data') return item.bytes;
    throw new Error(item.kind === 'closed' ? item.reason : `Unexpected end of stream on the ${this.label} websocket`);
  }

  /**
   * With a bound, a frame the peer does not take within it (it stopped reading: the socket's buffers
   * stay full) ends the socket, so a sender waiting on it fails instead of waiting forever.
   */
  sendBoundMs?: number;

  send(bytes: Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.socket.readyState !== this.socket.OPEN) return reject(new Error(`The ${this.label} websocket is closed`));
      const bound = this.sendBoundMs;
      const timer = bound ? setTimeout(() => {
        reject(new Error(`The peer took nothing on the ${this.label} websocket for ${bound / 1000} s; it stopped reading`));
        this.socket.terminate();
      }, bound) : undefined;
      this.socket.send(bytes, { binary: true }, (err) => {
        clearTimeout(timer);
        this.lastActivity = Date.now();
        if (err) reject(err);
        else resolve();
      });
    });
  }

  sendBarrier(): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.socket.readyState !== this.socket.OPEN) return reject(new Error(`The ${this.label} websocket is closed`));
      this.socket.send('', { binary: false }, (err) => (err ? reject(err) : resolve()));
    });
  }

  close(): void {
    if (this.socket.readyState === this.socket.OPEN || this.socket.readyState === this.socket.CONNECTING) this.socket.close(1000);
  }
}
