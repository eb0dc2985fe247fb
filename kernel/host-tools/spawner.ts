/**
 * Children started by corral-spawner (spawner.c) instead of node's child_process: node forks and waits
 * for the child's exec on the event loop's own thread (~2-3 ms a process, a fifth of the daemon's time
 * under a load of `lxc exec`s, issue 21). The helper does both beside it. The child's stdin, stdout
 * and stderr are unix stream sockets the helper opens back to the daemon (node gives children socket
 * pairs too). Each is introduced by a one-time token, so no other local process can pass as one.
 *
 * SpawnedChild keeps the part of ChildProcess the host tools use: pid, the three streams, kill(), and
 * the 'error', 'exit' and 'close' events. It throws nothing the caller must catch. When the helper is
 * missing or keeps failing, start() returns undefined and the caller uses child_process.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { randomHex } from '../../sdk/index.js';

const HELPER_BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), 'corral-spawner');
/** A stream connection that has not said which child it is within this time is dropped. */
const INTRO_BOUND_MS = 5_000;
/** A helper with no child for this long is let go (an idle daemon keeps no extra process). */
const IDLE_MS = 10_000;
/** What spawner.c reads of one request, in fields. */
const MAX_REQUEST_FIELDS = 4096;
/** A helper that keeps dying is not started again: child_process it is, from then on. */
const MAX_DEATHS = 5;

const hex = (text: string) => Buffer.from(text, 'utf8').toString('hex');
const errnoName = (errno: number) => Object.entries(osConstants.errno).find(([, n]) => n === errno)?.[0] ?? `errno ${errno}`;
const signalName = (signal: number) => (Object.entries(osConstants.signals).find(([, n]) => n === signal)?.[0] ?? null) as NodeJS.Signals | null;

export interface SpawnerOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** The child dies with the daemon (its parent death signal, through the helper's). */
  endWithDaemon?: boolean;
}

/** A child the helper started: ChildProcess's streams, pid, kill() and events. */
export class SpawnedChild extends EventEmitter {
  pid: number | undefined;
  readonly stdin = new PassThrough();
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  private exited = false;
  private pendingSignal: NodeJS.Signals | number | undefined;
  private streamsOpen = 2;
  private readonly attached = new Set<number>();
  private stdinSocket: Socket | undefined;

  constructor() {
    super();
    for (const out of [this.stdout, this.stderr]) out.once('end', () => this.streamEnded());
  }

  kill(signal: NodeJS.Signals | number = 'SIGTERM'): boolean {
    if (this.exited) return false;
    if (this.pid === undefined) {
      this.pendingSignal = signal;
      return true;
    }
    try {
      process.kill(this.pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /** @internal the helper's answers */
  started(pid: number): void {
    this.pid = pid;
    if (this.pendingSignal !== undefined) this.kill(this.pendingSignal);
    this.emit('spawn');
  }

  /** @internal stream n of the child; false when it has it already, or is over without it. */
  attach(n: number, socket: Socket): boolean {
    if (this.attached.has(n) || this.pid === undefined && this.exited) return false;
    this.attached.add(n);
    socket.on('error', () => {});
    if (n === 0) {
      // The helper's word of the exit can come before the input's connection (a loaded daemon reads the
      // introductions later): as at an exit seen first, the input ends. A grandchild reading it (`sh -c
      // cat` forks) would otherwise wait on it forever, holding the output open.
      if (this.exited) {
        socket.destroy();
        return true;
      }
      this.stdinSocket = socket;
      this.stdin.pipe(socket);
      // A client that stops reading must not stop the daemon; what is written after the end is dropped.
      this.stdin.on('error', () => {});
    } else {
      socket.pipe(n === 1 ? this.stdout : this.stderr);
    }
    return true;
  }

  /** @internal whether all three streams came. */
  get complete(): boolean {
    return this.attached.size === 3;
  }

  /** @internal */
  failed(errno: number, file: string): void {
    this.exited = true;
    const code = errnoName(errno);
    const err = Object.assign(new Error(`spawn ${file} ${code}`), { code, errno: -errno, syscall: `spawn ${file}`, path: file });
    this.emit('error', err);
    this.endStreams();
    this.emit('close', null, null);
  }

  /** @internal */
  ended(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.exited) return;
    this.exited = true;
    this.exitCode = code;
    this.signalCode = signal;
    // As node does at a child's exit: input nobody will read is dropped, with its connection.
    this.stdin.destroy();
    this.stdinSocket?.destroy();
    this.emit('exit', code, signal);
    // As node does: output nobody reads is let through, so that the streams end and 'close' comes. Not
    // before the caller of launch() ran: a child that exits at once has its start and its end in one
    // answer of the helper, and the caller reads its streams only once the start's promise resolved.
    setImmediate(() => {
      for (const out of [this.stdout, this.stderr]) if (out.readableFlowing === null) out.resume();
    });
    this.streamEnded(0);
  }

  /**
   * @internal the helper died: its children's ends are not known. Streams that reached the daemon end
   * when the child does; those still on their way never will (the daemon stops listening for them).
   */
  lost(): void {
    if (this.pid === undefined) return this.failed(osConstants.errno.ECHILD, 'corral-spawner');
    if (!this.attached.has(0)) this.stdin.destroy();
    if (!this.attached.has(1)) this.stdout.end();
    if (!this.attached.has(2)) this.stderr.end();
    this.ended(null, 'SIGKILL');
  }

  private endStreams(): void {
    this.streamsOpen = -1;
    this.stdin.destroy();
    this.stdout.end();
    this.stderr.end();
  }

  private streamEnded(count = 1): void {
    this.streamsOpen -= count;
    if (this.streamsOpen === 0 && this.exited) {
      this.streamsOpen = -1;
      this.emit('close', this.exitCode, this.signalCode);
    }
  }
}

export class Spawner {
  private helper: ChildProcess | undefined;
  private server: Server | undefined;
  private readonly name = `corral-spawner-${process.pid}-${randomHex(6)}`;
  /** Helpers that died under the daemon (one let go when idle does not count). */
  private deaths = 0;
  private nextId = 1;
  /** By id: children asked for and not yet exited, with their token and file. */
  private readonly children = new Map<number, { child: SpawnedChild; token: string; file: string }>();
  private readonly byToken = new Map<string, SpawnedChild>();
  private readonly envCache = new WeakMap<object, string>();
  private idle: NodeJS.Timeout | undefined;

  constructor(private readonly bin = HELPER_BIN, private readonly idleMs = IDLE_MS) {}

  /** A child started by the helper, or undefined when the helper cannot be used. */
  start(file: string, args: readonly string[], opts: SpawnerOptions = {}): SpawnedChild | undefined {
    // The helper reads at most 4,096 fields a request (spawner.c): a longer one is node's to start.
    if (8 + args.length + (opts.env ? Object.keys(opts.env).length + 1 : 1) > MAX_REQUEST_FIELDS) return undefined;
    const helper = this.running();
    if (!helper?.stdin?.writable) return undefined;
    const id = this.nextId++;
    const token = randomHex(16);
    const child = new SpawnedChild();
    this.children.set(id, { child, token, file });
    this.byToken.set(token, child);
    this.holdOpen();
    helper.stdin.write(['S', id, token, opts.endWithDaemon ? 1 : 0, opts.cwd ? hex(opts.cwd) : '-', hex(file), args.length + 1, hex(file), ...args.map(hex), this.encodedEnv(opts.env)].join(' ') + '\n');
    return child;
  }

  /**
   * The environment as the request carries it: its count, then each entry. Without one the helper passes
   * on its own, the daemon's as it was when the helper started (the daemon does not change its own).
   * The same object (exec sessions pass one) is encoded once.
   */
  private encodedEnv(env: NodeJS.ProcessEnv | undefined): string {
    if (!env) return '-';
    let encoded = this.envCache.get(env);
    if (encoded === undefined) {
      const entries = Object.entries(env).filter(([, v]) => v !== undefined).map(([k, v]) => hex(`${k}=${v}`));
      encoded = [entries.length, ...entries].join(' ');
      this.envCache.set(env, encoded);
    }
    return encoded;
  }

  /** Stop the helper (children it started keep running unless they were to end with the daemon). */
  stop(): void {
    clearTimeout(this.idle);
    this.helper?.stdin?.end();
    this.helper = undefined;
    this.server?.close();
    this.server = undefined;
  }

  private running(): ChildProcess | undefined {
    if (this.helper) return this.helper;
    if (this.deaths >= MAX_DEATHS || !existsSync(this.bin)) return undefined;
    // Not half-open: a stream connection ends both ways when the child's side does (at its exit at the
    // latest), so that none outlives its child.
    const server = createServer({ allowHalfOpen: false }, (socket) => this.introduce(socket));
    // No socket to connect back to, no helper: node's child_process from then on.
    server.once('error', () => {
      this.deaths = MAX_DEATHS;
      if (this.helper) this.helper.kill('SIGKILL');
    });
    server.listen(`\0${this.name}`);
    server.unref();
    this.server = server;
    const helper = spawn(this.bin, [hex(this.name)], { stdio: ['pipe', 'pipe', 'ignore'] });
    this.helper = helper;
    // The helper does not hold the daemon open; children's streams do while they run.
    helper.unref();
    for (const stream of [helper.stdin, helper.stdout]) (stream as unknown as Socket).unref();
    let partial = '';
    helper.stdout!.setEncoding('latin1');
    helper.stdout!.on('data', (chunk: string) => {
      const text = partial + chunk;
      const end = text.lastIndexOf('\n');
      partial = text.slice(end + 1);
      if (end >= 0) for (const line of text.slice(0, end).split('\n')) this.answer(line);
    });
    helper.stdin!.on('error', () => {});
    helper.once('error', () => this.helperGone(helper));
    helper.once('exit', () => this.helperGone(helper));
    return helper;
  }

  private answer(line: string): void {
    const [kind, idText, a, b] = line.split(' ');
    const entry = this.children.get(Number(idText));
    if (!entry) return;
    if (kind === 'P') {
      entry.child.started(Number(a));
    } else if (kind === 'F') {
      this.forget(Number(idText));
      entry.child.failed(Number(a), entry.file);
    } else if (kind === 'X') {
      this.forget(Number(idText));
      entry.child.ended(Number(a) < 0 ? null : Number(a), Number(a) < 0 ? signalName(Number(b)) : null);
    }
  }

  /** Its streams may still be on their way (the helper connects them before the fork): the token stays until they are. */
  private forget(id: number): void {
    const entry = this.children.get(id);
    if (!entry) return;
    this.children.delete(id);
    if (entry.child.complete || entry.child.pid === undefined) this.byToken.delete(entry.token);
    this.holdOpen();
  }

  /**
   * The daemon's event loop is held open while a child is asked for or running (its answers come from
   * the helper) and while a child's streams are still to connect; an idle helper holds nothing.
   */
  private holdOpen(): void {
    const out = this.helper?.stdout as unknown as Socket | undefined;
    if (this.children.size) out?.ref();
    else out?.unref();
    if (this.byToken.size) this.server?.ref();
    else this.server?.unref();
    clearTimeout(this.idle);
    if (this.helper && !this.children.size && !this.byToken.size) {
      this.idle = setTimeout(() => {
        if (!this.children.size && !this.byToken.size) this.stop();
      }, this.idleMs);
      this.idle.unref();
    }
  }

  /** A connection from the helper: "<token> <n>\n", then the child's stream n. */
  private introduce(socket: Socket): void {
    socket.on('error', () => {});
    const timer = setTimeout(() => socket.destroy(), INTRO_BOUND_MS);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const nl = head.indexOf(0x0a);
      if (nl < 0) {
        if (head.length > 64) socket.destroy();
        return;
      }
      socket.off('data', onData);
      clearTimeout(timer);
      socket.pause();
      const [token, n] = head.subarray(0, nl).toString('latin1').split(' ');
      const child = token === undefined ? undefined : this.byToken.get(token);
      if (!child || !['0', '1', '2'].includes(n ?? '') || !child.attach(Number(n), socket)) return void socket.destroy();
      if (child.complete) {
        this.byToken.delete(token!);
        this.holdOpen();
      }
      // What came after the introduction is already the child's output.
      if (nl + 1 < head.length) socket.unshift(head.subarray(nl + 1));
      socket.resume();
    };
    socket.on('data', onData);
  }

  private helperGone(helper: ChildProcess): void {
    if (this.helper !== helper) return;
    this.deaths++;
    this.helper = undefined;
    this.server?.close();
    this.server = undefined;
    for (const [id, entry] of [...this.children]) {
      this.forget(id);
      entry.child.lost();
    }
  }
}
