/**
 * One `lxc` client home reaching daemons as remotes over HTTPS on loopback, as a user who moves
 * things between hosts has it: each daemon gets a listener on its own 127.0.0.x address and a trust
 * password, and the client adds it by that password. The client runs with no socket of its own, so
 * only remotes are reached. Tests between daemons (migration, image copies) and the bench share it.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { collectRun, type ClientRun } from './clients.js';
import type { HttpResult } from './daemon.js';
import { freePort } from './tls-client.js';

/** What a remote needs of a daemon: corral's test daemon and the private reference both fit. */
export interface Listening {
  request(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<HttpResult>;
}

export interface TimedRun extends ClientRun {
  ms: number;
}

interface Asserts {
  is(actual: unknown, expected: unknown, message?: string): unknown;
}

export class RemoteClient {
  readonly home = mkdtempSync(path.join(tmpdir(), 'corral-remotes-'));
  /** Each remote's HTTPS address, `host:port`. */
  readonly addresses = new Map<string, string>();
  /** Added to a failed command's message (a peer's log, say). */
  describeFailure: () => string = () => '';

  constructor(readonly password: string, private readonly bound = 180_000) {}

  /** The environment `lxc` runs with: this home, and no socket. */
  env = (): NodeJS.ProcessEnv => {
    const { LXD_SOCKET: _socket, LXD_DIR: _dir, ...env } = process.env;
    return { ...env, LXD_CONF: this.home, HOME: this.home };
  };

  /** `lxc` with this home; timed, the client's own start included. */
  lxc = async (...args: string[]): Promise<TimedRun> => {
    const t0 = performance.now();
    const child = spawn('lxc', args, { env: this.env() });
    child.stdin.end();
    const run = await collectRun(child, this.bound);
    return { ...run, ms: performance.now() - t0 };
  };

  /** A command the test expects to succeed: asserted, and its output. */
  ok = async (t: Asserts, ...args: string[]): Promise<string> => {
    const res = await this.lxc(...args);
    t.is(res.status, 0, `lxc ${args.join(' ')}: ${res.stderr}${res.status === 0 ? '' : this.describeFailure()}`);
    return res.stdout;
  };

  /** A command that must succeed outside any test's assertions (setup, bench): it throws otherwise. */
  must = async (...args: string[]): Promise<TimedRun> => {
    const res = await this.lxc(...args);
    if (res.status !== 0) throw new Error(`lxc ${args.join(' ')}: ${res.stderr}${this.describeFailure()}`);
    return res;
  };

  /** Turns on the daemon's HTTPS listener at `address` (a free port) with this client's password: its URL. */
  listen = async (daemon: Listening, address: string): Promise<string> => {
    const port = await freePort();
    const set = await daemon.request('PATCH', '/1.0', { config: { 'core.https_address': `${address}:${port}`, 'core.trust_password': this.password } });
    if (set.status !== 200) throw new Error(`https listener at ${address}: ${set.body}`);
    return `https://${address}:${port}`;
  };

  /** Adds `url` as remote `name`, trusted by password. */
  addUrl = async (name: string, url: string): Promise<void> => {
    await this.must('remote', 'add', name, url, '--password', this.password, '--accept-certificate');
    this.addresses.set(name, new URL(url).host);
  };

  /** Listen, then add: the daemon is remote `name`. */
  add = async (name: string, daemon: Listening, address: string): Promise<string> => {
    const url = await this.listen(daemon, address);
    await this.addUrl(name, url);
    return url;
  };

  remove(): void {
    rmSync(this.home, { recursive: true, force: true });
  }
}
