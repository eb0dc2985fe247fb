/**
 * The forwarder of one proxy device: a small Node process of its own (it outlives a daemon
 * restart, as the instance does, and exits when the instance's init does). It runs in the host's
 * network namespace; sockets that must live in the instance's namespace (its TCP/UDP addresses,
 * abstract unix names) are made by a helper started in that namespace (`nsenter -n`), which hands
 * them over as file descriptors on the IPC channel: data then flows in this process only, between
 * two sockets, with no extra hop. Unix paths inside the instance are reached through
 * /proc/<init>/root.
 *
 * Run as `node forwarder.js <json config>`; prints `ready` once every listener is up, or an error
 * on stderr and exits 1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import { chmodSync, chownSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { connectPort, parseProxyAddress, type ProxyAddress } from './address.js';
import { proxyHeaderV1 } from './proxy-header.js';

export interface ForwarderConfig {
  listen: string;
  connect: string;
  bind: 'host' | 'instance';
  /** The instance's init process and its start time (a reused pid is not the instance). */
  pid: number;
  pidStart: string;
  proxyProtocol: boolean;
  /** Owner and mode of a unix listening socket (host ids). */
  uid?: number;
  gid?: number;
  mode?: number;
  /** Privileges the forwarder drops to once its listeners are up. */
  securityUid?: number;
  securityGid?: number;
}

/** Idle UDP sessions (one per client address) are closed after this long. */
const UDP_IDLE_MS = 120_000;

export function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22 (start time), counted after the parenthesised command name.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

type Handle = net.Server | net.Socket | dgram.Socket;

/** Sockets made inside the instance's network namespace by the helper. */
class NetnsHelper {
  private child?: ChildProcess;
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: (h: Handle) => void; reject: (e: Error) => void }>();

  constructor(private readonly pid: number) {}

  private start(): ChildProcess {
    if (this.child) return this.child;
    const script = fileURLToPath(import.meta.url);
    const child = spawn('nsenter', ['-t', String(this.pid), '-n', process.execPath, script, '--netns-helper'], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    child.on('message', (msg: { id: number; ok: boolean; error?: string }, handle: Handle | undefined) => {
      const waiter = this.pending.get(msg.id);
      if (!waiter) return;
      this.pending.delete(msg.id);
      if (msg.ok && handle) waiter.resolve(handle);
      else waiter.reject(new Error(msg.error ?? 'no socket came back'));
    });
    child.on('exit', () => {
      for (const w of this.pending.values()) w.reject(new Error('the namespace helper exited'));
      this.pending.clear();
      this.child = undefined;
    });
    this.child = child;
    return child;
  }

  /** Started before privileges are dropped: nsenter needs them. */
  ensureStarted(): void {
    this.start();
  }

  request<T extends Handle>(op: string, spec: object): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (h: Handle) => void, reject });
      this.start().send({ id, op, spec });
    });
  }

  stop(): void {
    this.child?.kill('SIGKILL');
  }
}

const dgramType = (host: string) => (net.isIPv6(host) ? 'udp6' : 'udp4');

/** The helper side: runs in the instance's network namespace, answers with sockets. */
function runHelper(): void {
  process.on('message', (msg: { id: number; op: string; spec: { host: string; port: number; path?: string } }) => {
    const fail = (err: Error) => process.send!({ id: msg.id, ok: false, error: err.message });
    const { spec } = msg;
    switch (msg.op) {
      case 'listen-stream': {
        const server = net.createServer();
        server.once('error', fail);
        const opts = spec.path !== undefined ? { path: spec.path } : { host: spec.host, port: spec.port };
        server.listen(opts, () => process.send!({ id: msg.id, ok: true }, server, () => server.close()));
        return;
      }
      case 'connect-stream': {
        const opts = spec.path !== undefined ? { path: spec.path } : { host: spec.host, port: spec.port };
        const socket = net.connect(opts);
        // Nothing may be read here: bytes the server sends first must reach the other process.
        socket.pause();
        socket.once('error', fail);
        socket.once('connect', () => process.send!({ id: msg.id, ok: true }, socket));
        return;
      }
      case 'listen-dgram':
      case 'connect-dgram': {
        const socket = dgram.createSocket(dgramType(spec.host));
        socket.once('error', fail);
        const port = msg.op === 'listen-dgram' ? spec.port : 0;
        socket.bind(port, msg.op === 'listen-dgram' ? spec.host : undefined, () => process.send!({ id: msg.id, ok: true }, socket, () => socket.close()));
        return;
      }
      default:
        fail(new Error(`unknown request ${msg.op}`));
    }
  });
  process.on('disconnect', () => process.exit(0));
}

class Forwarder {
  private readonly listenAddr: ProxyAddress;
  private readonly connectAddr: ProxyAddress;
  private readonly helper: NetnsHelper;
  private readonly closers: (() => void)[] = [];

  constructor(private readonly cfg: ForwarderConfig) {
    this.listenAddr = parseProxyAddress(cfg.listen, 'listen');
    this.connectAddr = parseProxyAddress(cfg.connect, 'connect');
    this.helper = new NetnsHelper(cfg.pid);
  }

  private inInstance(side: 'listen' | 'connect'): boolean {
    return (side === 'listen') === (this.cfg.bind === 'instance');
  }

  /** A unix path as this process reaches it: paths inside the instance go through its root. */
  private unixPath(a: ProxyAddress, side: 'listen' | 'connect'): { path: string; remote: boolean } {
    if (a.abstract) return { path: `\0${a.path}`, remote: this.inInstance(side) };
    return { path: this.inInstance(side) ? `/proc/${this.cfg.pid}/root${a.path}` : a.path, remote: false };
  }

  private async listenStream(a: ProxyAddress, port: number): Promise<net.Server> {
    const unix = a.protocol === 'unix' ? this.unixPath(a, 'listen') : undefined;
    if (unix && !a.abstract) rmSync(unix.path, { force: true });
    let server: net.Server;
    if (unix ? unix.remote : this.inInstance('listen')) {
      server = await this.helper.request<net.Server>('listen-stream', unix ? { path: unix.path } : { host: a.host, port });
    } else {
      server = net.createServer();
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(unix ? { path: unix.path } : { host: a.host, port }, () => resolve());
      });
    }
    if (unix && !a.abstract) {
      const { uid, gid, mode } = this.cfg;
      if (uid !== undefined || gid !== undefined) chownSync(unix.path, uid ?? -1, gid ?? -1);
      chmodSync(unix.path, mode ?? 0o644);
      this.closers.push(() => rmSync(unix.path, { force: true }));
    }
    this.closers.push(() => server.close());
    return server;
  }

  private async connectStream(port: number): Promise<net.Socket> {
    const a = this.connectAddr;
    const unix = a.protocol === 'unix' ? this.unixPath(a, 'connect') : undefined;
    const spec = unix ? { path: unix.path } : { host: a.host, port };
    if (unix ? unix.remote : this.inInstance('connect')) return this.helper.request<net.Socket>('connect-stream', spec);
    return new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect({ ...spec, allowHalfOpen: true } as net.NetConnectOpts);
      s.once('error', reject);
      s.once('connect', () => {
        s.removeListener('error', reject);
        resolve(s);
      });
    });
  }

  private async dgramSocket(side: 'listen' | 'connect', host: string, port: number): Promise<dgram.Socket> {
    if (this.inInstance(side)) return this.helper.request<dgram.Socket>(side === 'listen' ? 'listen-dgram' : 'connect-dgram', { host, port });
    const s = dgram.createSocket(dgramType(host));
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.bind(side === 'listen' ? port : 0, side === 'listen' ? host : undefined, () => resolve());
    });
    return s;
  }

  private header(client: net.Socket): Buffer | undefined {
    if (!this.cfg.proxyProtocol) return undefined;
    return proxyHeaderV1(client.remoteAddress, client.remotePort, client.localAddress, client.localPort);
  }

  /** A stream client: to a stream upstream (piped both ways) or to UDP (each chunk one datagram). */
  private async onStreamClient(client: net.Socket, port: number): Promise<void> {
    client.pause();
    // Each direction ends on its own (a client's EOF must not cut the server's answer short).
    client.allowHalfOpen = true;
    client.on('error', () => client.destroy());
    if (this.connectAddr.protocol === 'udp') {
      const udp = await this.dgramSocket('connect', this.connectAddr.host, port).catch(() => undefined);
      if (!udp) return void client.destroy();
      udp.on('message', (msg) => client.write(msg));
      udp.on('error', () => client.destroy());
      client.on('data', (chunk) => udp.send(chunk, port, this.connectAddr.host));
      client.on('close', () => udp.close());
      client.resume();
      return;
    }
    let upstream: net.Socket;
    try {
      upstream = await this.connectStream(port);
    } catch {
      client.destroy();
      return;
    }
    upstream.allowHalfOpen = true;
    upstream.on('error', () => {
      upstream.destroy();
      client.destroy();
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    const header = this.header(client);
    if (header) upstream.write(header);
    client.pipe(upstream);
    upstream.pipe(client);
    client.resume();
  }

  /** UDP clients, one session per source address: to a UDP upstream, or a stream one. */
  private serveDatagrams(sock: dgram.Socket, port: number): void {
    const sessions = new Map<string, { send: (b: Buffer) => void; close: () => void; timer?: NodeJS.Timeout }>();
    sock.on('message', async (msg, rinfo) => {
      const key = `${rinfo.address}:${rinfo.port}`;
      let session = sessions.get(key);
      if (!session) {
        const reply = (b: Buffer) => sock.send(b, rinfo.port, rinfo.address);
        let queued: Buffer[] | undefined = [msg];
        const pending: { send: (b: Buffer) => void; close: () => void; timer?: NodeJS.Timeout } = {
          send: (b) => void queued?.push(b),
          close: () => undefined,
        };
        sessions.set(key, pending);
        const end = () => {
          sessions.delete(key);
          clearTimeout(pending.timer);
          pending.close();
        };
        try {
          if (this.connectAddr.protocol === 'udp') {
            const up = await this.dgramSocket('connect', this.connectAddr.host, port);
            up.on('message', (b) => {
              reply(b);
              touch();
            });
            pending.send = (b) => void up.send(b, port, this.connectAddr.host);
            pending.close = () => up.close();
          } else {
            const up = await this.connectStream(port);
            up.on('data', (b) => {
              reply(b);
              touch();
            });
            up.on('error', () => up.destroy());
            up.on('close', end);
            pending.send = (b) => void up.write(b);
            pending.close = () => up.destroy();
          }
        } catch {
          end();
          return;
        }
        const touch = () => {
          clearTimeout(pending.timer);
          pending.timer = setTimeout(end, UDP_IDLE_MS).unref();
        };
        touch();
        for (const b of queued) pending.send(b);
        queued = undefined;
        return;
      }
      session.send(msg);
    });
  }

  /** Whether some socket lives in the instance's network namespace (made by the helper). */
  private needsHelper(): boolean {
    const remote = (a: ProxyAddress, side: 'listen' | 'connect') => this.inInstance(side) && (a.protocol !== 'unix' || a.abstract);
    return remote(this.listenAddr, 'listen') || remote(this.connectAddr, 'connect');
  }

  async start(): Promise<void> {
    if (this.needsHelper()) this.helper.ensureStarted();
    const l = this.listenAddr;
    const count = l.protocol === 'unix' ? 1 : l.ports.length;
    for (let i = 0; i < count; i++) {
      const port = this.connectAddr.protocol === 'unix' ? 0 : connectPort(this.connectAddr, i);
      if (l.protocol === 'udp') {
        const sock = await this.dgramSocket('listen', l.host, l.ports[i]!);
        this.closers.push(() => sock.close());
        this.serveDatagrams(sock, port);
      } else {
        const server = await this.listenStream(l, l.ports[i] ?? 0);
        server.on('connection', (c: net.Socket) => void this.onStreamClient(c, port));
      }
    }
    if (this.cfg.securityGid !== undefined) {
      process.setgroups?.([]);
      process.setgid?.(this.cfg.securityGid);
    }
    if (this.cfg.securityUid !== undefined) process.setuid?.(this.cfg.securityUid);
  }

  close(): void {
    for (const c of this.closers.reverse()) {
      try { c(); } catch { /* already gone */ }
    }
    this.helper.stop();
  }

  /** Exit when the instance's init has gone (stopped, or its pid reused). */
  watchInstance(): void {
    setInterval(() => {
      if (processStart(this.cfg.pid) !== this.cfg.pidStart) {
        this.close();
        process.exit(0);
      }
    }, 1000);
  }
}

async function main(): Promise<void> {
  if (process.argv[2] === '--netns-helper') {
    runHelper();
    return;
  }
  const cfg = JSON.parse(process.argv[2] ?? '{}') as ForwarderConfig;
  const forwarder = new Forwarder(cfg);
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    process.on(sig, () => {
      forwarder.close();
      process.exit(0);
    });
  }
  // The daemon may go away: nothing is written after `ready`, and a broken pipe is not fatal.
  process.stdout.on('error', () => undefined);
  process.stderr.on('error', () => undefined);
  try {
    await forwarder.start();
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    forwarder.close();
    process.exit(1);
  }
  forwarder.watchInstance();
  process.stdout.write('ready\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) void main();
