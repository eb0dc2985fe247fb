/** Bytes written straight to a daemon's socket, for requests no HTTP client library would send. */
import http from 'node:http';
import net from 'node:net';

export interface RawAnswer {
  /** Everything the server sent before it closed or went quiet. */
  text: string;
  /** The status of the first answer (0 when none came). */
  status: number;
  /** The JSON body of the first answer, when it has one. */
  json: any;
  /** A socket error the client saw while writing or reading (EPIPE, ECONNRESET), if any. */
  error?: string;
}

/**
 * Write `parts` (each written after the previous one was flushed) and collect the answer. The
 * exchange ends when the server closes, or `quietMs` after the first answer is complete.
 */
export function rawExchange(socketPath: string, parts: (string | Buffer)[], quietMs = 300): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = net.connect(socketPath);
    let received = Buffer.alloc(0);
    let error: string | undefined;
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      const text = received.toString('utf8');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const head = text.indexOf('\r\n\r\n');
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text.slice(0, head))?.[1] ?? -1);
      let json: unknown;
      try { json = JSON.parse(length >= 0 ? text.slice(head + 4, head + 4 + length) : text.slice(head + 4)); } catch { /* not JSON */ }
      resolve({ text, status, json, error });
    };
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      clearTimeout(timer);
      timer = setTimeout(finish, quietMs);
    });
    socket.on('error', (err: NodeJS.ErrnoException) => (error = err.code ?? err.message));
    socket.on('close', finish);
    (async () => {
      for (const part of parts) {
        if (socket.destroyed) return;
        await new Promise<void>((done) => socket.write(part, () => done()));
      }
    })();
  });
}

/** A websocket upgrade request for `path` with a valid handshake, unless `headers` replace parts of it. */
export function upgradeRequest(path: string, headers: Record<string, string> = {}): string {
  const all: Record<string, string> = {
    Host: 'corral', Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers,
  };
  return `GET ${path} HTTP/1.1\r\n${Object.entries(all).filter(([, v]) => v !== '').map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`;
}

/** An answer as sent: status, header lines (name, case and order kept; Date left out, it moves) and bytes. */
export interface SentAnswer { status: number; headers: string[]; body: Buffer }

/** One request on a fresh connection to a unix socket, answered as sent (SentAnswer). */
export function requestAsSent(socketPath: string, url: string, headers: Record<string, string> = {}, method = 'GET', body?: string): Promise<SentAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: url, method, headers: { Host: 'corral', ...headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const lines: string[] = [];
        for (let i = 0; i < res.rawHeaders.length; i += 2) if (res.rawHeaders[i] !== 'Date') lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
        resolve({ status: res.statusCode ?? 0, headers: lines, body: Buffer.concat(chunks) });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

