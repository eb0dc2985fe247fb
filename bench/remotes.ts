/**
 * Daemons reached as `lxc` remotes over HTTPS on loopback, for the scenarios between daemons: each
 * gets a listener on its own 127.0.18.x address and a trust password, and one client home holds
 * the remotes, as a user who moves things between hosts has it. Commands are timed whole, the
 * client's own start included (that is what a user waits for).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { collectRun, type ClientRun } from '../test/helpers/clients.js';
import type { HttpResult } from '../test/helpers/daemon.js';
import { freePort } from '../test/helpers/tls-client.js';

const PASSWORD = 'bench-remotes-17';

/** What a remote needs of a daemon: corral's test daemon and the private reference both fit. */
export interface Listening {
  request(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<HttpResult>;
}

export interface TimedRun extends ClientRun {
  ms: number;
}

export class Remotes {
  readonly home = mkdtempSync(path.join(tmpdir(), 'corral-bench-remotes-'));
  /** Each remote's HTTPS address, `host:port`. */
  readonly addresses = new Map<string, string>();

  /** Turns on the daemon's HTTPS listener at `address` and adds it as remote `name` (trusted by password). */
  async add(name: string, daemon: Listening, address: string): Promise<string> {
    const port = await freePort();
    const set = await daemon.request('PATCH', '/1.0', { config: { 'core.https_address': `${address}:${port}`, 'core.trust_password': PASSWORD } });
    if (set.status !== 200) throw new Error(`https listener for ${name}: ${set.body}`);
    const url = `https://${address}:${port}`;
    const added = await this.lxc('remote', 'add', name, url, '--password', PASSWORD, '--accept-certificate');
    if (added.status !== 0) throw new Error(`lxc remote add ${name}: ${added.stderr}`);
    this.addresses.set(name, `${address}:${port}`);
    return url;
  }

  /** `lxc` with this home and no socket of its own, so only remotes are reached; timed. */
  async lxc(...args: string[]): Promise<TimedRun> {
    const { LXD_SOCKET: _socket, LXD_DIR: _dir, ...env } = process.env;
    const t0 = performance.now();
    const child = spawn('lxc', args, { env: { ...env, LXD_CONF: this.home, HOME: this.home } });
    child.stdin.end();
    const run = await collectRun(child, 300_000);
    return { ...run, ms: performance.now() - t0 };
  }

  /** A command that must succeed: its time. */
  async ok(...args: string[]): Promise<number> {
    const run = await this.lxc(...args);
    if (run.status !== 0) throw new Error(`lxc ${args.join(' ')}: ${run.stderr}`);
    return run.ms;
  }

  remove(): void {
    rmSync(this.home, { recursive: true, force: true });
  }
}
