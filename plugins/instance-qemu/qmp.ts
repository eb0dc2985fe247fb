/**
 * A QMP client over a VM's monitor socket: reads the greeting, negotiates capabilities, then
 * sends commands one at a time and hands asynchronous events to listeners. Every wait is bounded.
 */
import { EventEmitter } from 'node:events';
import net from 'node:net';

export interface QmpEvent {
  event: string;
  data?: Record<string, unknown>;
}

export class QmpError extends Error {
  constructor(message: string, readonly qmpClass?: string) {
    super(message);
  }
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

export class QmpClient extends EventEmitter {
  private buffer = '';
  private readonly pending: Pending[] = [];
  private closed = false;

  private constructor(private readonly socket: net.Socket) {
    super();
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => this.receive(chunk));
    socket.on('close', () => this.shut(new QmpError('the QMP connection closed')));
    socket.on('error', (err) => this.shut(new QmpError(`QMP: ${err.message}`)));
  }

  /** Connects, waits for the greeting and enters command mode; gives up after `timeoutMs`. */
  static async connect(socketPath: string, timeoutMs: number): Promise<QmpClient> {
    const socket = net.connect(socketPath);
    const client = new QmpClient(socket);
    try {
      await withTimeout(new Promise<void>((resolve, reject) => {
        client.once('greeting', () => resolve());
        client.once('closed', (err: Error) => reject(err));
      }), timeoutMs, 'the QMP greeting');
      await client.execute('qmp_capabilities', undefined, timeoutMs);
      return client;
    } catch (err) {
      client.close();
      throw err;
    }
  }

  get isClosed(): boolean {
    return this.closed;
  }

  execute<T = unknown>(command: string, args?: Record<string, unknown>, timeoutMs = 10_000): Promise<T> {
    if (this.closed) return Promise.reject(new QmpError('the QMP connection is closed'));
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        const at = this.pending.findIndex((p) => p.timer === timer);
        // Answers come in order: a lost answer would shift every later one, so the link is dropped.
        if (at >= 0) this.shut(new QmpError(`QMP command ${command} had no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.push({ resolve: resolve as (v: unknown) => void, reject, timer });
      this.socket.write(`${JSON.stringify(args ? { execute: command, arguments: args } : { execute: command })}\n`);
    });
  }

  close(): void {
    this.shut(new QmpError('the QMP connection was closed'));
  }

  private receive(chunk: string): void {
    this.buffer += chunk;
    for (let nl = this.buffer.indexOf('\n'); nl >= 0; nl = this.buffer.indexOf('\n')) {
      const line = this.buffer.slice(0, nl).trim();
      this.buffer = this.buffer.slice(nl + 1);
      if (!line) continue;
      let msg: Record<string, any>;
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      if (msg.QMP) this.emit('greeting', msg.QMP);
      else if (msg.event) this.emit('event', { event: msg.event, data: msg.data } satisfies QmpEvent);
      else if ('return' in msg || 'error' in msg) {
        const p = this.pending.shift();
        if (!p) continue;
        clearTimeout(p.timer);
        if (msg.error) p.reject(new QmpError(msg.error.desc ?? 'QMP error', msg.error.class));
        else p.resolve(msg.return);
      }
    }
  }

  private shut(err: Error): void {
    if (this.closed) return;
    this.closed = true;
    for (const p of this.pending.splice(0)) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.socket.destroy();
    this.emit('closed', err);
  }
}

export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new QmpError(`${what} did not come within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
