/**
 * The guest socket's front door: a plain socket server that reads a request's head and, when the
 * question is small (no body, no upgrade, an answer known whole), writes the whole answer in one
 * write and closes. Anything else (a websocket, an image export, a request with a body, a head it
 * cannot read plainly) is handed, bytes read so far included, to a full Node HTTP server.
 *
 * Why: most guest requests are one small GET per connection, and Node's HTTP server spends most
 * of such a request building streams, a parser and request/response objects; the fewer cycles a
 * request needs, the less its latency suffers when the host is busy (see decision 0072).
 */
import http from 'node:http';
import net from 'node:net';

/** A whole answer: status, content type and body. */
export interface SmallAnswer {
  status: number;
  type: string;
  body: string;
}

export interface FrontDoorOptions {
  /** The whole answer to `method target`, or undefined to hand the request to `fallback`. */
  quick(method: string, target: string): SmallAnswer | undefined;
  fallback: http.Server;
  /** A guest that sends no complete head within this time is dropped. */
  headersTimeoutMs: number;
}

/** Heads longer than this are the full server's to refuse (Node's default limit). */
const MAX_HEAD = 16 * 1024;
/** Headers after which the request is not a small one. */
const NOT_SMALL = new Set(['transfer-encoding', 'upgrade', 'expect']);

export class FrontDoor {
  readonly server: net.Server;
  private readonly open = new Set<net.Socket>();

  constructor(private readonly opts: FrontDoorOptions) {
    this.server = net.createServer((socket) => this.accept(socket));
  }

  /** Drop every connection, answered or handed over. */
  closeAll(): void {
    for (const socket of this.open) socket.destroy();
    this.open.clear();
  }

  private accept(socket: net.Socket): void {
    this.open.add(socket);
    socket.once('close', () => this.open.delete(socket));
    // A guest that goes away mid-request must not take the daemon with it.
    socket.on('error', () => socket.destroy());
    const timer = setTimeout(() => socket.destroy(), this.opts.headersTimeoutMs);
    let head: Buffer | undefined;
    const onData = (chunk: Buffer) => {
      head = head ? Buffer.concat([head, chunk]) : chunk;
      const end = head.indexOf('\r\n\r\n');
      if (end < 0 && head.length < MAX_HEAD) return;
      socket.off('data', onData);
      clearTimeout(timer);
      const answer = end < 0 ? undefined : this.small(head.toString('latin1', 0, end));
      // Answered and flushed: the connection goes, whatever the guest does with its end.
      if (answer) socket.end(encode(answer), () => socket.destroy());
      else this.handOver(socket, head);
    };
    socket.on('data', onData);
  }

  /** The answer when the head is a plain, body-less request the caller answers whole. */
  private small(head: string): SmallAnswer | undefined {
    const lines = head.split('\r\n');
    const [method, target, version, extra] = lines[0]!.split(' ');
    if (extra !== undefined || !method || !target?.startsWith('/') || !version?.startsWith('HTTP/1.') || method === 'HEAD') return undefined;
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(':');
      // Folded or malformed lines are the full parser's business.
      if (colon <= 0 || line[0] === ' ' || line[0] === '\t') return undefined;
      const name = line.slice(0, colon).trim().toLowerCase();
      if (NOT_SMALL.has(name)) return undefined;
      if (name === 'content-length' && line.slice(colon + 1).trim() !== '0') return undefined;
    }
    return this.opts.quick(method, target);
  }

  /**
   * The full server takes the connection: it attaches its parser, which is then fed the bytes
   * already read, synchronously, before any later byte can reach it.
   */
  private handOver(socket: net.Socket, head: Buffer): void {
    socket.pause();
    this.opts.fallback.emit('connection', socket);
    socket.emit('data', head);
    socket.resume();
  }
}

function encode(answer: SmallAnswer): Buffer {
  const body = Buffer.from(answer.body);
  const head = `HTTP/1.1 ${answer.status} ${http.STATUS_CODES[answer.status] ?? ''}\r\nContent-Type: ${answer.type}\r\n`
    + `Content-Length: ${body.length}\r\nDate: ${new Date().toUTCString()}\r\nConnection: close\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), body]);
}
