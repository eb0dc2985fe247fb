/**
 * One instance's guest socket: a small HTTP/1.1 server on `<dir>/sock`, which the container sees
 * as `/dev/lxd/sock`. Whoever connects to it is that instance: the socket is its identity, so an
 * answer never carries another instance's data. Answers come from a view of the instance kept
 * up to date by the plugin (no store read per request).
 */
import { chmodSync, createReadStream, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import http from 'node:http';
import type { Socket } from 'node:net';
import path from 'node:path';
import type { WebSocketServer, WebSocket } from 'ws';
import { randomHex, truthy, type ImagesService, type StoredImageFile } from '../../sdk/index.js';
import { guestChanges, type GuestEvent, type GuestView } from './changes.js';

/** A guest waiting longer than this for the HTTP head of its request is dropped. */
const HEADERS_TIMEOUT_MS = 10_000;
/**
 * A connection that has sent nothing after this long is dropped (checked every half of it): Node's
 * head timeout starts with the first byte, so a silent guest would hold a descriptor forever. A
 * sweep, not a timer per connection: a socket timer is re-armed on every read and write.
 */
const SILENT_TIMEOUT_MS = 10_000;
const EVENT_TYPES = new Set(['config', 'device']);

export interface EndpointDeps {
  /** The daemon's name as events and `GET /1.0` show it ("none" standalone). */
  location(): string;
  images(): ImagesService | undefined;
}

/** A whole answer: status, content type and body. */
interface SmallAnswer {
  status: number;
  type: string;
  body: string;
}

/** An answer streamed from files (an image export). */
type Streamed = (res: http.ServerResponse) => Promise<void>;

export class GuestEndpoint {
  private server?: http.Server;
  /** Made at the first event listener: ws is loaded then, not at every daemon's start. */
  private wss: WebSocketServer | undefined;
  private readonly listeners = new Map<WebSocket, Set<string>>();
  /** Open connections that had sent nothing at the last sweep, with when they came. */
  private readonly silent = new Map<Socket, number>();
  private sweeper?: NodeJS.Timeout;

  constructor(
    readonly project: string,
    readonly name: string,
    readonly dir: string,
    private view: GuestView,
    private readonly deps: EndpointDeps,
  ) {}

  get socketPath(): string {
    return path.join(this.dir, 'sock');
  }

  get listening(): boolean {
    return Boolean(this.server?.listening);
  }

  /**
   * Listen on a fresh socket (an old file from a former daemon is replaced), reachable by any user inside.
   * The file calls are synchronous: each is one cheap syscall, and a daemon starting with hundreds of
   * containers running makes them all before it serves.
   */
  async listen(): Promise<void> {
    if (this.server) return;
    rmSync(this.socketPath, { force: true });
    const server = http.createServer((req, res) => this.answer(req, res));
    server.headersTimeout = HEADERS_TIMEOUT_MS;
    server.on('connection', (socket: Socket) => {
      this.silent.set(socket, Date.now());
      // Swept only while some connection has not spoken yet: a host with hundreds of idle guests runs no timers for them.
      this.sweeper ??= setInterval(() => this.sweep(), SILENT_TIMEOUT_MS / 2).unref();
      // Gone at once when closed: a socket kept until the next sweep would outlive the young generation.
      socket.once('close', () => this.silent.delete(socket));
    });
    server.on('upgrade', (req, socket, head) => this.upgrade(req, socket, head));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    chmodSync(this.socketPath, 0o666);
  }

  /** Stop answering; with `remove`, the socket file goes too (the directory stays: it may still be mounted). */
  async close(remove = true): Promise<void> {
    const server = this.server;
    this.server = undefined;
    clearInterval(this.sweeper);
    this.sweeper = undefined;
    this.silent.clear();
    for (const ws of this.listeners.keys()) ws.terminate();
    this.listeners.clear();
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    if (remove) await rm(this.socketPath, { force: true });
  }

  private sweep(): void {
    const now = Date.now();
    for (const [socket, since] of this.silent) {
      if (socket.destroyed || socket.bytesRead > 0) this.silent.delete(socket);
      else if (now - since >= SILENT_TIMEOUT_MS) {
        this.silent.delete(socket);
        socket.destroy();
      }
    }
    if (!this.silent.size) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }

  /** A new view of the instance: guests listening for events hear what changed. */
  update(view: GuestView): void {
    const changes = guestChanges(this.view, view);
    this.view = view;
    for (const change of changes) this.send(change);
  }

  private send(change: GuestEvent): void {
    const text = JSON.stringify({ type: change.type, timestamp: new Date().toISOString(), metadata: change.metadata });
    for (const [ws, types] of this.listeners) if (types.has(change.type)) ws.send(text);
  }

  private answer(req: http.IncomingMessage, res: http.ServerResponse): void {
    // Every path answers any method as GET does: the reference's guest socket does not look at the method.
    const answer = this.answerOf(urlOf(req.url)?.pathname);
    // A stream that fails midway (a file gone, the guest gone) ends the connection, never the daemon.
    if (typeof answer === 'function') return void answer(res).catch(() => res.destroy());
    send(res, answer);
  }

  /** What a path answers. Paths match exactly: `/1.0/` or `/1.0/config/` are 404s, as with the reference. */
  private answerOf(p: string | undefined): SmallAnswer | Streamed {
    switch (p) {
      case '/': return json(['/1.0']);
      case '/1.0': return json({ api_version: '1.0', location: this.deps.location(), instance_type: 'container', state: '' });
      case '/1.0/config': return json(Object.keys(this.view.config).filter(guestKey).sort().map((k) => `/1.0/config/${k}`));
      case '/1.0/meta-data': return this.metaData();
      case '/1.0/devices': return json(this.view.devices);
      case '/1.0/events': return text(400, 'the events endpoint is a websocket: send an upgrade request');
      case undefined: return text(400, 'the request target is not a path');
    }
    const key = /^\/1\.0\/config\/([^/]+)$/.exec(p);
    if (key) return this.configKey(decode(key[1]!));
    const image = /^\/1\.0\/images\/([^/]+)\/export$/.exec(p);
    if (image) return (res) => this.exportImage(decode(image[1]!), res);
    return text(404, 'not found');
  }

  private configKey(key: string): SmallAnswer {
    if (!guestKey(key)) return text(403, 'not authorized (only user.* and cloud-init.* keys are visible from inside)');
    const value = this.view.config[key];
    if (value === undefined) return text(404, 'not found');
    return { status: 200, type: 'application/octet-stream', body: value };
  }

  private metaData(): SmallAnswer {
    const extra = this.view.config['user.meta-data'] ?? '';
    const id = this.view.config['volatile.cloud-init.instance-id'] || this.name;
    return { status: 200, type: 'text/plain', body: `#cloud-config\ninstance-id: ${id}\nlocal-hostname: ${this.name}\n${extra}` };
  }

  /** An image of the instance's project, as the main API exports it; only with `security.devlxd.images`. */
  private async exportImage(fingerprint: string, res: http.ServerResponse): Promise<void> {
    if (!truthy(this.view.config['security.devlxd.images'])) return send(res, text(403, 'image export is not enabled for this instance (security.devlxd.images)'));
    const images = this.deps.images();
    if (!images || !/^[0-9a-f]{1,64}$/.test(fingerprint)) return send(res, text(404, 'not found'));
    let files;
    let full: string;
    try {
      full = (await images.resolve(this.project, { fingerprint })).fingerprint;
      files = await images.files(full);
    } catch {
      return send(res, text(404, 'not found'));
    }
    if (!files.rootfs) return streamFile(res, files.metadata, `${full}${files.metadata.extension}`, { 'Content-Type': 'application/octet-stream' });
    await streamMultipart(res, full, files.metadata, files.rootfs);
  }

  private upgrade(req: http.IncomingMessage, socket: import('node:stream').Duplex, head: Buffer): void {
    // A guest that goes away mid-answer must not take the daemon with it (the socket has no other error listener yet).
    socket.on('error', () => socket.destroy());
    const url = urlOf(req.url);
    if (url?.pathname !== '/1.0/events' || req.method !== 'GET') {
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      return;
    }
    const asked = (url.searchParams.get('type') || 'config,device').split(',').map((t) => t.trim()).filter(Boolean);
    const unknown = asked.find((t) => !EVENT_TYPES.has(t));
    if (unknown) {
      const body = `unknown event type "${unknown}" (config and device are known)`;
      socket.end(`HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      return;
    }
    const server = this.wss ? Promise.resolve(this.wss) : import('ws').then(({ WebSocketServer }) => (this.wss ??= new WebSocketServer({ noServer: true })));
    server.then((wss) => wss.handleUpgrade(req, socket, head, (ws) => {
      this.listeners.set(ws, new Set(asked));
      ws.on('close', () => this.listeners.delete(ws));
      ws.on('error', () => this.listeners.delete(ws));
    }), () => socket.destroy());
  }
}

const guestKey = (key: string): boolean => key.startsWith('user.') || key.startsWith('cloud-init.');

/**
 * A request target read as URL rules read it (dot segments resolved), or undefined when it is not
 * one (`//`, `/\\`): a guest's malformed request must get an answer, never an exception in the daemon.
 */
function urlOf(target: string | undefined): URL | undefined {
  try {
    return new URL(target ?? '/', 'http://devlxd');
  } catch {
    return undefined;
  }
}

/** A percent-decoded path segment; a malformed escape stays as written (and matches nothing). */
function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** A line of JSON, ending with a newline as the reference's answers do. */
const json = (value: unknown): SmallAnswer => ({ status: 200, type: 'application/json', body: `${JSON.stringify(value)}\n` });

const text = (status: number, message: string): SmallAnswer => ({ status, type: 'text/plain; charset=utf-8', body: `${message}\n` });

function send(res: http.ServerResponse, answer: SmallAnswer): void {
  res.writeHead(answer.status, { 'Content-Type': answer.type, 'Content-Length': Buffer.byteLength(answer.body) });
  res.end(answer.body);
}

function streamFile(res: http.ServerResponse, file: StoredImageFile, filename: string, headers: Record<string, string>): void {
  res.writeHead(200, { ...headers, 'Content-Length': file.size, 'Content-Disposition': `inline;filename=${filename}` });
  const stream = createReadStream(file.path);
  stream.on('error', () => res.destroy());
  stream.pipe(res);
}

/** A split image: its two files as parts of one multipart body, as the main API's export sends them. */
async function streamMultipart(res: http.ServerResponse, fp: string, metadata: StoredImageFile, rootfs: StoredImageFile): Promise<void> {
  const boundary = randomHex(30);
  const part = (field: string, name: string, first: boolean) =>
    `${first ? '' : '\r\n'}--${boundary}\r\nContent-Disposition: form-data; name="${field}"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  const heads = [part('metadata', `meta-${fp}${metadata.extension}`, true), part(rootfs.kind === 'qcow2' ? 'rootfs.img' : 'rootfs', `${fp}${rootfs.extension}`, false)];
  const tail = `\r\n--${boundary}--\r\n`;
  const length = Buffer.byteLength(heads[0]!) + metadata.size + Buffer.byteLength(heads[1]!) + rootfs.size + Buffer.byteLength(tail);
  res.writeHead(200, { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': length });
  for (const [i, file] of [metadata, rootfs].entries()) {
    res.write(heads[i]!);
    for await (const chunk of createReadStream(file.path)) {
      if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
    }
  }
  res.end(tail);
}
