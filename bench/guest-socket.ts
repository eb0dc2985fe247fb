/**
 * The guest socket (/dev/lxd/sock): latency of `GET /1.0` asked from inside a container by the
 * static client (one connection per request, as a guest tool would): the daemon's first rounds
 * (its code still compiling), then settled; the same client on the host talking to the same socket
 * (what the container's path adds); beside a bare Node http server given the same warm-up and a
 * minimal C server (the floors of Node and of this machine); the daemon's CPU per request, cold
 * and settled. And isolation under load:
 * a guest listening for events while 1,000 lifecycle events of another instance happen hears none;
 * and what an update of a running instance costs the daemon (its CPU time per PATCH) with a small
 * project and with 40 more instances in it: the guest's view is refreshed from that instance alone.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot, startWithPool, unixRequest, unixWebsocket, waitFor } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { lxc, lxcEnv } from '../test/helpers/clients.js';
import { buildDevlxdClient, removeDevlxdClient } from '../test/helpers/devlxd-client.js';
import { call, create, type Row } from './containers.js';

const REQUESTS = Number(process.env.BENCH_DEVLXD_REQUESTS ?? 2000);
const FOREIGN = Number(process.env.BENCH_DEVLXD_EVENTS ?? 1000);
const PROJECT_SIZE = Number(process.env.BENCH_DEVLXD_PROJECT_SIZE ?? 40);
const UPDATES = Number(process.env.BENCH_DEVLXD_UPDATES ?? 200);

/** CPU time (user + system) a process has used, in ms (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** Daemon CPU per PATCH of a running instance's user key (the guest's view is refreshed each time). */
async function cpuPerUpdate(d: Awaited<ReturnType<typeof startWithPool>>, name: string, round: string): Promise<number> {
  const before = cpuMs(d.child.pid!);
  for (let i = 0; i < UPDATES; i++) await d.request('PATCH', `/1.0/instances/${name}`, { config: { 'user.round': `${round}-${i}` } });
  // The refreshes run after the answers: wait until the guest socket serves the last value.
  const sock = path.join(d.dir, 'devlxd', `default_${name}`, 'sock');
  await waitFor(async () => (await unixRequest(sock, 'GET', '/1.0/config/user.round')).body === `${round}-${UPDATES - 1}`, 30000, 'the last update to reach the guest socket');
  return (cpuMs(d.child.pid!) - before) / UPDATES;
}

/** "p50 p99 max" in microseconds, as the client prints them. */
const parse = (out: string) => out.trim().split(/\s+/).map(Number) as [number, number, number];

/**
 * A floor: the same client against a server alone in its process, either a bare Node http server
 * (warmed with as many requests as the daemon had before its settled round) or a minimal C server.
 */
async function floorBench(client: string, kind: 'node' | 'c', warmup: number): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-u3-floor-'));
  const sock = path.join(dir, 'sock');
  let server;
  if (kind === 'node') {
    const code = `require('http').createServer((q,s)=>{const b='{"api_version":"1.0","location":"none","instance_type":"container","state":""}\\n';s.writeHead(200,{'Content-Type':'application/json','Content-Length':b.length});s.end(b)}).listen(${JSON.stringify(sock)},()=>console.log('up'))`;
    server = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  } else {
    const binary = path.join(dir, 'unix-http-floor');
    const built = spawnSync('musl-gcc', ['-static', '-Os', '-Wall', '-Wextra', '-Werror', '-o', binary, path.join(projectRoot, 'bench/fixtures/unix-http-floor.c')], { encoding: 'utf8' });
    if (built.status !== 0) throw new Error(`building the C floor server failed: ${built.stderr}`);
    server = spawn(binary, [sock], { stdio: ['ignore', 'pipe', 'inherit'] });
  }
  try {
    await new Promise<void>((resolve, reject) => {
      server.stdout!.once('data', () => resolve());
      server.once('exit', () => reject(new Error(`the ${kind} floor server exited`)));
    });
    if (warmup) await runClient(client, sock, warmup);
    return await runClient(client, sock);
  } finally {
    server.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

function runClient(client: string, sock: string, requests = REQUESTS): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const p = spawn(client, ['bench', '/1.0', String(requests)], { env: { ...process.env, DEVLXD_SOCK: sock } });
    let out = '';
    p.stdout.on('data', (c: Buffer) => (out += c));
    p.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`the bench client exited ${code}`))));
  });
}

export async function guestSocketScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const image = buildBusyboxImage('gzip');
  const client = buildDevlxdClient();
  const d = await startWithPool({ plugins: 'full' });
  const extra: string[] = [];
  try {
    await importImage(d, image.unified, 'bb');
    for (const name of ['u3bench1', 'u3bench2']) {
      await create(d, name);
      await call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'start' });
    }
    await lxc(d.socket, 'file', 'push', client, 'u3bench1/devlxd-client', '--mode', '0755');
    // The daemon's first guest requests: a warm-up round (discarded), then a round while its code still compiles.
    const pid = d.child.pid!;
    await lxc(d.socket, 'exec', 'u3bench1', '--', '/devlxd-client', 'bench', '/1.0', '500');
    let cpu = cpuMs(pid);
    const inside = await lxc(d.socket, 'exec', 'u3bench1', '--', '/devlxd-client', 'bench', '/1.0', String(REQUESTS));
    if (inside.status !== 0) throw new Error(`bench inside: ${inside.stderr}`);
    // Per request, with the exec that carries the client around it (a few ms in all, spread over the round).
    const coldCpuUs = ((cpuMs(pid) - cpu) * 1000) / REQUESTS;
    const sock = path.join(d.dir, 'devlxd', 'default_u3bench1', 'sock');
    cpu = cpuMs(pid);
    const host = await runClient(client, sock);
    const hostCpuUs = ((cpuMs(pid) - cpu) * 1000) / REQUESTS;
    // Settled: inside again, after 2 × REQUESTS + 500 requests.
    cpu = cpuMs(pid);
    const again = await lxc(d.socket, 'exec', 'u3bench1', '--', '/devlxd-client', 'bench', '/1.0', String(REQUESTS));
    const settledCpuUs = ((cpuMs(pid) - cpu) * 1000) / REQUESTS;
    const node = await floorBench(client, 'node', 2 * REQUESTS + 500);
    const c = await floorBench(client, 'c', 0);
    const [p50, p99, max] = parse(inside.stdout);
    const [hp50, hp99] = parse(host);
    const [np50, np99] = parse(node);
    const [cp50, cp99] = parse(c);
    const [ap50, ap99] = parse(again.stdout);
    results.devlxd_get_1_0 = {
      requests: REQUESTS, inside_us: { p50, p99, max }, inside_second_round_us: { p50: ap50, p99: ap99 }, host_us: { p50: hp50, p99: hp99 },
      bare_node_server_warmed_us: { p50: np50, p99: np99 }, c_server_us: { p50: cp50, p99: cp99 },
      settled_p99_ratio_inside_to_host: ap99 / hp99, settled_p99_ratio_inside_to_bare_node: ap99 / np99, settled_p99_ratio_inside_to_c: ap99 / cp99,
      daemon_cpu_us_per_request: { first_round_inside: coldCpuUs, host_round: hostCpuUs, settled_inside: settledCpuUs },
    };
    const ms = (us: number) => (us / 1000).toFixed(2);
    rows.push({
      scenario: `devlxd GET /1.0 from inside, ${REQUESTS} sequential connections`,
      value: `settled: p50 ${ms(ap50)} ms, p99 ${ms(ap99)} ms (the daemon's first round: p99 ${ms(p99)} ms; same socket from the host: p99 ${ms(hp99)} ms; a bare node http server, warmed: p99 ${ms(np99)} ms; a C server: p99 ${ms(cp99)} ms)`,
      target: 'p99 < 2 ms',
    });
    rows.push({ scenario: '  daemon CPU per guest request: first round, host round, settled', value: `${coldCpuUs.toFixed(0)} µs, ${hostCpuUs.toFixed(0)} µs, ${settledCpuUs.toFixed(0)} µs` });

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

    // An update's cost with the project as it is (2 instances), then with PROJECT_SIZE more (stopped) ones.
    const small = await cpuPerUpdate(d, 'u3bench1', 'small');
    for (let i = 0; i < PROJECT_SIZE; i++) {
      const name = `u3pad${i}`;
      extra.push(name);
      await create(d, name);
    }
    const large = await cpuPerUpdate(d, 'u3bench1', 'large');
    results.devlxd_update_cost = { updates: UPDATES, daemon_cpu_ms_per_update_2_instances: small, [`daemon_cpu_ms_per_update_${PROJECT_SIZE + 2}_instances`]: large, ratio_large_to_small: large / small };
    rows.push({
      scenario: `devlxd: daemon CPU per update of a running instance, project of 2 vs ${PROJECT_SIZE + 2} instances`,
      value: `${small.toFixed(2)} ms vs ${large.toFixed(2)} ms (ratio ${(large / small).toFixed(2)})`,
      target: 'the instance\'s own cost (ratio near 1)',
    });
  } finally {
    for (const name of ['u3bench1', 'u3bench2', ...extra]) await lxc(d.socket, 'delete', '--force', name);
    await d.stop();
    removeDevlxdClient();
    rmSync(image.dir, { recursive: true, force: true });
  }
}
