/**
 * The soak's probe (soak.ts) in a thread of its own: `GET /1.0` every `everyMs` over a keep-alive
 * connection, as an operator's poll does. An operator's client is a process of its own; timed on the
 * bench's event loop, beside the sixteen clients of the load, a probe would also wait there while their
 * answers were parsed and their websockets served, and count that as the daemon's.
 */
import http from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';

export interface ProbeJob { socket: string; stopAt: number; countFrom: number; everyMs: number; timeoutMs: number }
export interface ProbeResult { latencies: number[]; failures: number }

const { socket, stopAt, countFrom, everyMs, timeoutMs } = workerData as ProbeJob;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function get(): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.request({ socketPath: socket, agent, method: 'GET', path: '/1.0' }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode === 200));
      res.on('error', () => resolve(false));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error('timed out')));
    req.on('error', () => resolve(false));
    req.end();
  });
}

const result: ProbeResult = { latencies: [], failures: 0 };
while (Date.now() < stopAt) {
  const started = process.hrtime.bigint();
  const ok = await get();
  // A probe that fails or times out counts at the step bound: it is the worst latency, not a crash.
  const ms = ok ? Number(process.hrtime.bigint() - started) / 1e6 : timeoutMs;
  if (!ok) result.failures++;
  if (Date.now() >= countFrom) result.latencies.push(ms);
  await sleep(everyMs);
}
agent.destroy();
parentPort!.postMessage(result);
