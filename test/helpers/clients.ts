/** Runs the real clients (lxc from lxd-client, pylxd under /usr/bin/python3) against a daemon's socket. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface ClientRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

const lxcConf = mkdtempSync(path.join(tmpdir(), 'corral-lxc-conf-'));
// One per test process, gone with it.
process.once('exit', () => rmSync(lxcConf, { recursive: true, force: true }));

export const lxcEnv = (socket: string) => ({ ...process.env, LXD_SOCKET: socket, LXD_CONF: lxcConf, HOME: lxcConf });

/** Asynchronous, so the daemon in this same process keeps serving while lxc runs. */
export function lxc(socket: string, ...args: string[]): Promise<ClientRun> {
  return lxcWithInput(socket, '', ...args);
}

/**
 * lxc with `input` on stdin. stdin is always closed: `lxc init`/`launch` read a config document
 * from a stdin that is not a terminal and would wait forever on an open pipe.
 */
export function lxcWithInput(socket: string, input: string, ...args: string[]): Promise<ClientRun> {
  const child = spawn('lxc', args, { env: lxcEnv(socket) });
  // lxc may exit before reading its input (a refused command): the closed pipe is not the test's failure.
  child.stdin.on('error', () => {});
  child.stdin.end(input);
  return collectRun(child, 60_000);
}

/** What a spawned client printed and how it ended; killed after `timeoutMs`. */
export function collectRun(child: ChildProcess, timeoutMs: number): Promise<ClientRun> {
  return new Promise((resolve) => {
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c) => (stdout += c));
    child.stderr?.on('data', (c) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/** A script that hangs (waiting on a daemon that never answers) is killed after `timeoutMs`. */
export function python(script: string, args: string[], timeoutMs = 180_000): Promise<ClientRun> {
  const child = spawn('/usr/bin/python3', [script, ...args], { env: { ...process.env, PYLXD_WARNINGS: 'none' } });
  return collectRun(child, timeoutMs);
}

/** lxc that must succeed: asserts exit 0 (showing stderr otherwise) and returns stdout. */
export async function lxcOk(t: { is(actual: unknown, expected: unknown, message?: string): unknown }, socket: string, ...args: string[]): Promise<string> {
  const res = await lxc(socket, ...args);
  t.is(res.status, 0, `lxc ${args.join(' ')}: ${res.stderr}`);
  return res.stdout;
}

/** lxc that must fail: asserts a non-zero exit and returns what the user sees on stderr. */
export async function lxcRefused(t: { not(actual: unknown, expected: unknown, message?: string): unknown }, socket: string, ...args: string[]): Promise<string> {
  const res = await lxc(socket, ...args);
  t.not(res.status, 0, `lxc ${args.join(' ')} should have failed: ${res.stdout}`);
  return res.stderr;
}

export const hasLxc = () => spawnSync('lxc', ['--version']).status === 0;
