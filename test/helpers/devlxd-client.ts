/**
 * The static /dev/lxd/sock client of test/fixtures/devlxd-client, built once per run with
 * musl-gcc (busybox containers have no unix-socket HTTP client), and ways to run it inside a
 * container through the lxc client.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot } from './daemon.js';
import { lxc } from './clients.js';

/** Why the client cannot be built here, or undefined. */
export function devlxdClientUnavailable(): string | undefined {
  return spawnSync('sh', ['-c', 'command -v musl-gcc'], { encoding: 'utf8' }).status === 0
    ? undefined : 'musl-gcc is not installed (package musl-tools; scripts/install.sh installs it)';
}

let built: string | undefined;

/** Path of the built client on the host. */
export function buildDevlxdClient(): string {
  if (built) return built;
  const out = path.join(mkdtempSync(path.join(tmpdir(), 'corral-devlxd-client-')), 'devlxd-client');
  const src = path.join(projectRoot, 'test/fixtures/devlxd-client/devlxd-client.c');
  const r = spawnSync('musl-gcc', ['-static', '-Os', '-Wall', '-Wextra', '-Werror', '-o', out, src], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`building the devlxd client failed: ${r.stderr}`);
  return (built = out);
}

/** Remove the built client (end of a test file or bench run). */
export function removeDevlxdClient(): void {
  if (built) rmSync(path.dirname(built), { recursive: true, force: true });
  built = undefined;
}

/** A `get` answer: status line, then the body. */
export interface GuestAnswer {
  status: number;
  body: string;
}

export function parseGet(stdout: string): GuestAnswer {
  const nl = stdout.indexOf('\n');
  return { status: Number(stdout.slice(0, nl)), body: stdout.slice(nl + 1) };
}

/** Launch `name` from the image `bb` with `config`, and put the client at /devlxd-client in it. */
export async function launchWithClient(socket: string, client: string, name: string, config: Record<string, string> = {}): Promise<void> {
  const args = Object.entries(config).flatMap(([k, v]) => ['-c', `${k}=${v}`]);
  const r = await lxc(socket, 'launch', 'bb', name, ...args);
  if (r.status !== 0) throw new Error(`lxc launch ${name}: ${r.stderr}`);
  const push = await lxc(socket, 'file', 'push', client, `${name}/devlxd-client`, '--mode', '0755');
  if (push.status !== 0) throw new Error(`lxc file push: ${push.stderr}`);
}

/** A request from inside `name` (a JSON body when one is given); status -1 when the client failed. */
export async function askInside(socket: string, name: string, urlPath: string, method = 'GET', body?: string): Promise<GuestAnswer> {
  const r = await lxc(socket, 'exec', name, '--', '/devlxd-client', 'get', urlPath, method, ...(body === undefined ? [] : [body]));
  if (r.status !== 0) return { status: -1, body: r.stderr || r.stdout };
  return parseGet(r.stdout);
}
