/**
 * A private instance of the reference daemon (Debian's `lxd` 5.0.2) for interoperability tests:
 * its own LXD_DIR in a temporary directory, a `dir` pool named `default` and a root disk in the
 * default profile, made through its API; stopped with `lxd shutdown` and removed at the end.
 * Tests skip (with a message) only when the `lxd` binary is absent.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { lxc, type ClientRun } from './clients.js';
import { unixRequest, waitFor, type HttpResult } from './daemon.js';

export interface ReferenceDaemon {
  dir: string;
  socket: string;
  request(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<HttpResult>;
  /** A request answered by an operation, and the operation once it ended. */
  call(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<HttpResult & { op?: any }>;
  lxc(...args: string[]): Promise<ClientRun>;
  log(): string;
  stop(): Promise<void>;
}

/** Why the reference daemon cannot run here, or undefined when it can. */
export function referenceUnavailable(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v lxd'], { encoding: 'utf8' });
  if (found.status !== 0) return 'the reference daemon (Debian package "lxd") is not installed';
  return undefined;
}

/** Mount points at or below `dir`, deepest first. */
function mountsBelow(dir: string): string[] {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
    .map((line) => line.split(' ')[4])
    .filter((m): m is string => !!m && (m === dir || m.startsWith(`${dir}/`)));
  return mounts.sort((a, b) => b.length - a.length);
}

export async function startReference(): Promise<ReferenceDaemon> {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-ref-'));
  chmodSync(dir, 0o711);
  const socket = path.join(dir, 'unix.socket');
  // npm puts node_modules/.bin first on PATH, where an unrelated `nft` shadows the one lxd runs (and panics on).
  const hostPath = (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':').filter((p) => !p.includes('node_modules')).join(':');
  // GOTRACEBACK=all: a reference stuck in an operation is made to print every goroutine's stack (see call()).
  const env = { ...process.env, PATH: hostPath, LXD_DIR: dir, GOTRACEBACK: 'all' };
  const logFile = path.join(dir, 'lxd.log');
  const child: ChildProcess = spawn('lxd', ['--group', 'root', '--debug', '--logfile', logFile], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c));
  let exited = false;
  child.on('exit', () => (exited = true));
  const log = () => `${stderr}${existsSync(logFile) ? readFileSync(logFile, 'utf8') : ''}`;

  const request = (method: string, url: string, body?: unknown, headers?: Record<string, string>) => unixRequest(socket, method, url, body, headers);
  const call = async (method: string, url: string, body?: unknown, headers?: Record<string, string>) => {
    const res = await request(method, url, body, headers);
    if (res.json?.type !== 'async') return res;
    // btrfs transaction commits on a loaded machine can stall the reference for minutes; a bound still holds.
    const op = await request('GET', `${res.json.operation}/wait?timeout=240`);
    const metadata = op.json?.metadata;
    if (metadata?.status === 'Running') {
      const running = (await request('GET', '/1.0/operations?recursion=1')).body;
      const tasks = spawnSync('ps', ['-eo', 'pid,stat,etimes,wchan:24,args', '--forest'], { encoding: 'utf8' }).stdout;
      // lxd takes SIGQUIT as a request to shut down; on SIGABRT the Go runtime prints every goroutine's
      // stack (GOTRACEBACK=all) and exits: where the reference is stuck.
      child.kill('SIGABRT');
      await waitFor(() => exited, 10_000, 'the reference daemon to dump its stacks').catch(() => {});
      return { ...res, op: { ...metadata, err: `still running after 240 s\n${running}\n${tasks}\n${log()}` } };
    }
    return { ...res, op: metadata };
  };

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    if (!exited) {
      // Stops its containers too; the daemon exits once done.
      spawnSync('lxd', ['shutdown', '--timeout', '60'], { env, stdio: 'ignore', timeout: 90_000 });
      await waitFor(() => exited, 15_000, 'the reference daemon to exit').catch(() => {
        child.kill('SIGKILL');
      });
    }
    for (const mount of mountsBelow(dir)) spawnSync('umount', ['-l', mount], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    await waitFor(async () => {
      if (exited) throw new Error(`lxd exited early: ${log()}`);
      if (!existsSync(socket)) return false;
      return request('GET', '/1.0').then((r) => r.status === 200, () => false);
    }, 60_000, 'the reference daemon socket');
    const waited = spawnSync('lxd', ['waitready', '--timeout', '60'], { env, encoding: 'utf8' });
    if (waited.status !== 0) throw new Error(`lxd waitready failed: ${waited.stderr}`);
    const pool = await request('POST', '/1.0/storage-pools', { name: 'default', driver: 'dir' });
    if (pool.json?.type !== 'sync') throw new Error(`creating the reference pool failed: ${pool.body}`);
    const profile = await request('PATCH', '/1.0/profiles/default', { devices: { root: { type: 'disk', path: '/', pool: 'default' } } });
    if (profile.json?.type !== 'sync') throw new Error(`setting the reference root disk failed: ${profile.body}`);
  } catch (err) {
    await stop();
    throw err;
  }
  return { dir, socket, request, call, lxc: (...args) => lxc(socket, ...args), log, stop };
}
