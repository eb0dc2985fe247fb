/**
 * The guest socket (/dev/lxd/sock): latency of `GET /1.0` asked from inside a container by the
 * static client (one connection per request, as a guest tool would), against the same client on
 * the host talking to the same socket (what the container's path adds) and beside a bare Node http
 * server (the floor of this machine), after a discarded warm-up round; and isolation under load:
 * a guest listening for events while 1,000 lifecycle events of another instance happen hears none.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, unixWebsocket, waitFor } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { lxc, lxcEnv } from '../test/helpers/clients.js';
import { buildDevlxdClient, removeDevlxdClient } from '../test/helpers/devlxd-client.js';
import { call, create, type Row } from './containers.js';

const REQUESTS = Number(process.env.BENCH_DEVLXD_REQUESTS ?? 2000);
const FOREIGN = Number(process.env.BENCH_DEVLXD_EVENTS ?? 1000);

/** "p50 p99 max" in microseconds, as the client prints them. */
const parse = (out: string) => out.trim().split(/\s+/).map(Number) as [number, number, number];

/** The floor on this machine: the same client against a bare Node http server alone in its process. */
async function bareServerBench(client: string): Promise<string> {
  const sock = path.join(mkdtempSync(path.join(tmpdir(), 'corral-u3-floor-')), 'sock');
  const code = `require('http').createServer((q,s)=>{const b='{"api_version":"1.0"}\\n';s.writeHead(200,{'Content-Type':'application/json','Content-Length':b.length});s.end(b)}).listen(${JSON.stringify(sock)},()=>console.log('up'))`;
  const server = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((resolve) => server.stdout.once('data', () => resolve()));
    return await runClient(client, sock);
  } finally {
    server.kill('SIGKILL');
    rmSync(path.dirname(sock), { recursive: true, force: true });
  }
}

function runClient(client: string, sock: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const p = spawn(client, ['bench', '/1.0', String(REQUESTS)], { env: { ...process.env, DEVLXD_SOCK: sock } });
    let out = '';
    p.stdout.on('data', (c: Buffer) => (out += c));
    p.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`the bench client exited ${code}`))));
  });
}

export async function guestSocketScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const image = buildBusyboxImage('gzip');
  const client = buildDevlxdClient();
  const d = await startWithPool({ plugins: 'full' });
  try {
    await importImage(d, image.unified, 'bb');
    for (const name of ['u3bench1', 'u3bench2']) {
      await create(d, name);
      await call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'start' });
    }
    await lxc(d.socket, 'file', 'push', client, 'u3bench1/devlxd-client', '--mode', '0755');
    // A warm-up round first (discarded): a long-running daemon has its handlers compiled by then.
    await lxc(d.socket, 'exec', 'u3bench1', '--', '/devlxd-client', 'bench', '/1.0', '500');
    const inside = await lxc(d.socket, 'exec', 'u3bench1', '--', '/devlxd-client', 'bench', '/1.0', String(REQUESTS));
    if (inside.status !== 0) throw new Error(`bench inside: ${inside.stderr}`);
    const sock = path.join(d.dir, 'devlxd', 'default_u3bench1', 'sock');
    const host = await runClient(client, sock);
    // Inside once more, after the host round: the first round, seconds after the start, still meets the daemon settling.
    const again = await lxc(d.socket, 'exec', 'u3bench1', '--', '/devlxd-client', 'bench', '/1.0', String(REQUESTS));
    const floor = await bareServerBench(client);
    const [p50, p99, max] = parse(inside.stdout);
    const [hp50, hp99] = parse(host);
    const [fp50, fp99] = parse(floor);
    const [ap50, ap99] = parse(again.stdout);
    results.devlxd_get_1_0 = {
      requests: REQUESTS, inside_us: { p50, p99, max }, inside_second_round_us: { p50: ap50, p99: ap99 }, host_us: { p50: hp50, p99: hp99 }, bare_node_server_us: { p50: fp50, p99: fp99 },
      settled_p99_ratio_inside_to_host: ap99 / hp99, settled_p99_ratio_inside_to_bare: ap99 / fp99,
    };
    rows.push({
      scenario: `devlxd GET /1.0 from inside, ${REQUESTS} sequential connections`,
      value: `settled: p50 ${(ap50 / 1000).toFixed(2)} ms, p99 ${(ap99 / 1000).toFixed(2)} ms (first round, seconds after the container's start: p99 ${(p99 / 1000).toFixed(2)} ms; same socket from the host: p99 ${(hp99 / 1000).toFixed(2)} ms; a bare node http server alone: p99 ${(fp99 / 1000).toFixed(2)} ms)`,
      target: 'p99 < 2 ms',
    });

    // A guest listens for every type; another instance's config changes 1,000 times (1,000 lifecycle events).
    const secs = 600;
    const listener = spawn('lxc', ['exec', 'u3bench1', '--', '/devlxd-client', 'events', 'type=config,device', String(secs)], { env: lxcEnv(d.socket), stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    listener.stdout.on('data', (c: Buffer) => (out += c));
    await waitFor(() => out.startsWith('ready\n'), 20000, 'the guest listener');
    let lifecycle = 0;
    const ws = await unixWebsocket(d.socket, '/1.0/events?type=lifecycle');
    ws.on('message', () => lifecycle++);
    for (let i = 0; i < FOREIGN; i++) {
      await d.request('PATCH', '/1.0/instances/u3bench2', { config: { 'user.n': String(i) } });
    }
    await waitFor(() => lifecycle >= FOREIGN, 30000, 'the lifecycle events');
    // One change of its own proves the listener was hearing all along.
    await d.request('PATCH', '/1.0/instances/u3bench1', { config: { 'user.own': 'yes' } });
    await waitFor(() => out.includes('user.own'), 10000, 'the guest to hear its own change');
    listener.kill('SIGKILL');
    ws.close();
    const heard = out.split('\n').slice(1).filter(Boolean);
    const foreign = heard.filter((l) => !l.includes('user.own')).length;
    results.devlxd_foreign_events = { lifecycle_events: lifecycle, foreign_delivered: foreign, own_delivered: heard.length - foreign };
    rows.push({ scenario: `devlxd events: foreign events delivered under ${FOREIGN} lifecycle events of another instance`, value: `${foreign} (own change heard: ${heard.length - foreign})`, target: '0' });
  } finally {
    for (const name of ['u3bench1', 'u3bench2']) await lxc(d.socket, 'delete', '--force', name);
    await d.stop();
    removeDevlxdClient();
    rmSync(image.dir, { recursive: true, force: true });
  }
}
