/** Starts a real corrald in a temporary data dir and talks to it over its unix socket. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';

export const distRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const projectRoot = path.resolve(distRoot, '..');
export const corrald = path.join(distRoot, 'bin', 'corrald.js');
/** The V8 flags `npm start` runs the daemon with (package.json config.nodeFlags), so tests and the bench measure the same process. */
const launch = JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')).config ?? {};
const words = (key: string): string[] => (launch[key] ?? '').split(/\s+/).filter(Boolean);
export const nodeFlags: string[] = words('nodeFlags');
/** The edge bundle's (config.edgeNodeFlags, `npm run start:edge`): a smaller young generation (decision 0002). */
export const edgeNodeFlags: string[] = words('edgeNodeFlags');
/** glibc's settings `npm start` and the systemd unit give the daemon (config.mallocEnv; decision 0002). */
export const mallocEnv: Record<string, string> = Object.fromEntries(words('mallocEnv').map((kv) => kv.split('=', 2)));

export interface Daemon {
  dir: string;
  socket: string;
  child: ChildProcess;
  output: () => string;
  request(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<HttpResult>;
  websocket(url: string): Promise<WebSocket>;
  stop(): Promise<number | null>;
}

export interface HttpResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  json: any;
}

/** The headers of a request with `payload`: JSON unless the caller says otherwise. */
export const requestHeaders = (payload: unknown, headers: Record<string, string>) => ({ ...(payload !== undefined ? { 'content-type': 'application/json' } : {}), ...headers });

/** A request whose connection stays silent this long fails (a wedged daemon must not hang the run); above the longest operation wait tests use. */
const SILENCE_MS = 300_000;

/** Sends `payload` on a request not yet ended, and reads the answer whole (its JSON too, when it is JSON). */
export function exchange(req: http.ClientRequest, payload: string | Buffer | undefined): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    req.setTimeout(SILENCE_MS, () => req.destroy(new Error(`no answer to ${req.method} ${req.path} after ${SILENCE_MS / 1000} s of silence`)));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, json });
      });
    });
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

// async: a request http refuses to build (a bad path) rejects, as an answer that fails would.
export async function unixRequest(socketPath: string, method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<HttpResult> {
  const payload = body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  return exchange(http.request({ socketPath, method, path: url, headers: requestHeaders(payload, headers) }), payload);
}

export function unixWebsocket(socketPath: string, url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws+unix://${socketPath}:${url}`);
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c));
      res.on('end', () => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode} ${text}`), { status: res.statusCode, body: text })));
    });
  });
}

export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 15000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const running = new Set<Daemon>();

/** Stops whatever a failed test left running (use in `test.after.always`). */
export async function stopDaemons(): Promise<void> {
  await Promise.all([...running].map((d) => d.stop()));
}

/**
 * `nodeArgs`: node options beside the daemon's own flags (the soak bench adds the inspector).
 * `entry`: the daemon's file (dist/bin/corrald.js unless a bundle is named).
 * `env`: added to the daemon's environment. `--init auto` makes no bridge in tests unless `env`
 * names one in CORRAL_INIT_NETWORK: bridges are host-wide, and test daemons run side by side.
 */
export async function startDaemon(opts: { plugins?: string; dir?: string; args?: string[]; nodeArgs?: string[]; env?: NodeJS.ProcessEnv; entry?: string } = {}): Promise<Daemon> {
  const dir = opts.dir ?? mkdtempSync(path.join(tmpdir(), 'corral-'));
  const socket = path.join(dir, 'unix.socket');
  const child = spawn(process.execPath, [...nodeFlags, ...(opts.nodeArgs ?? []), opts.entry ?? corrald, '--dir', dir, '--plugins', opts.plugins ?? 'full', ...(opts.args ?? [])], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...mallocEnv, CORRAL_INIT_NETWORK: 'none', ...opts.env },
  });
  const supervised = await superviseDaemon(child, { dir, socket, where: '', stopBoundMs: 60_000 });
  const daemon: Daemon = {
    ...supervised.daemon,
    async stop() {
      running.delete(daemon);
      const code = await supervised.daemon.stop();
      if (!opts.dir) removeDataDir(dir);
      return code;
    },
  };
  running.add(daemon);
  return daemon;
}

/**
 * A corrald child process as tests drive it: its output kept, its socket awaited (45 s, and answered by
 * this very process when `samePid`: a socket an earlier daemon of the dir left must not count), and a
 * bounded stop (SIGTERM, SIGKILL after `stopBoundMs`). `where` names it in errors (" in <netns>").
 */
export async function superviseDaemon(child: ChildProcess, opts: { dir: string; socket: string; where: string; stopBoundMs: number; samePid?: boolean }): Promise<{ daemon: Daemon; exited: Promise<number | null>; hasExited: () => boolean }> {
  const { dir, socket } = opts;
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c));
  child.stderr!.on('data', (c: Buffer) => (output += c));
  let exited = false;
  let how = '';
  const exitedPromise = new Promise<number | null>((resolve) => child.once('exit', (code, signal) => {
    exited = true;
    how = signal ? `killed by ${signal}` : `exit code ${code}`;
    resolve(code);
  }));
  await waitFor(async () => {
    if (exited) throw new Error(`corrald${opts.where} exited early (${how}): ${output}`);
    if (!existsSync(socket)) return false;
    return unixRequest(socket, 'GET', '/1.0')
      .then((r) => r.status === 200 && (!opts.samePid || r.json?.metadata?.environment?.server_pid === child.pid), () => false);
  }, 45_000, `the daemon socket${opts.where}`).catch((err) => {
    // A daemon too slow to come up (a loaded machine) would otherwise outlive the test.
    if (!exited) child.kill('SIGKILL');
    throw err;
  });
  const sockets: WebSocket[] = [];
  const daemon: Daemon = {
    dir,
    socket,
    child,
    output: () => output,
    request: (method, url, body, headers) => unixRequest(socket, method, url, body, headers),
    websocket: async (url) => {
      const ws = await unixWebsocket(socket, url);
      sockets.push(ws);
      return ws;
    },
    async stop() {
      for (const ws of sockets) ws.terminate();
      if (exited) return child.exitCode;
      child.kill('SIGTERM');
      // Bounded: a daemon that will not stop must not keep the test worker (and the run) alive.
      const timer = setTimeout(() => child.kill('SIGKILL'), opts.stopBoundMs);
      const code = await exitedPromise;
      clearTimeout(timer);
      return code;
    },
  };
  return { daemon, exited: exitedPromise, hasExited: () => exited };
}

/**
 * Containers outlive a daemon that exits on SIGTERM (the next daemon adopts them), so a test
 * that throws a data directory away kills what still runs in it first.
 */
export function killContainers(dir: string): void {
  const lxcpath = path.join(dir, 'containers');
  if (!existsSync(lxcpath)) return;
  for (const name of readdirSync(lxcpath)) {
    spawnSync('lxc-stop', ['-n', name, '-P', lxcpath, '-k'], { stdio: 'ignore', timeout: 10000 });
  }
}

/** Mounts a data directory still holds (layered dir volumes stay mounted after the daemon exits), deepest first. */
export function unmountUnder(dir: string): void {
  const prefix = path.resolve(dir) + '/';
  const points = readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
    .map((line) => line.split(' ')[4]?.replace(/\\040/g, ' '))
    .filter((p): p is string => Boolean(p?.startsWith(prefix)))
    .sort((a, b) => b.length - a.length);
  for (const p of points) spawnSync('umount', ['-l', p], { stdio: 'ignore', timeout: 10000 });
}

function removeDataDir(dir: string): void {
  killContainers(dir);
  unmountUnder(dir);
  rmSync(dir, { recursive: true, force: true });
}

/** Collect websocket messages as parsed JSON. */
export function collect(ws: WebSocket): any[] {
  const messages: any[] = [];
  ws.on('message', (data) => messages.push(JSON.parse(String(data))));
  return messages;
}

/** An `edge` daemon once `--init auto` has made its default pool: where every container test starts. */
export async function startWithPool(opts: { dir?: string; plugins?: string; nodeArgs?: string[]; env?: NodeJS.ProcessEnv; entry?: string } = {}): Promise<Daemon> {
  const daemon = await startDaemon({ plugins: 'edge', ...opts, args: ['--init', 'auto'] });
  await waitFor(async () => (await daemon.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
  // The init gives the default profile its root disk after making the pool: on a loaded machine a test could come in between.
  await waitFor(async () => (await daemon.request('GET', '/1.0/profiles/default')).json?.metadata?.devices?.root !== undefined, 10000, 'the init root disk');
  return daemon;
}
