/**
 * A small DevTools-protocol client for a daemon started with `--inspect=127.0.0.1:0`: its V8 heap
 * figures, a forced collection and heap snapshots. No domain is enabled beyond what a snapshot needs,
 * so the session itself keeps nothing in the daemon (Runtime.enable would buffer console messages).
 */
import { writeFileSync } from 'node:fs';
import WebSocket from 'ws';

const CALL_TIMEOUT_MS = 120_000;

export class Inspector {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  private chunks: string[] | undefined;

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data));
      if (msg.method === 'HeapProfiler.addHeapSnapshotChunk') return void this.chunks?.push(msg.params.chunk);
      const waiter = msg.id !== undefined ? this.pending.get(msg.id) : undefined;
      if (!waiter) return;
      this.pending.delete(msg.id);
      clearTimeout(waiter.timer);
      if (msg.error) waiter.reject(new Error(`${msg.error.message}`));
      else waiter.resolve(msg.result);
    });
    ws.on('close', () => {
      for (const w of this.pending.values()) w.reject(new Error('inspector closed'));
      this.pending.clear();
    });
  }

  /** Finds the inspector's address in the daemon's output (node prints it on stderr at start). */
  static async connect(output: () => string): Promise<Inspector> {
    const url = /Debugger listening on (ws:\/\/\S+)/.exec(output())?.[1];
    if (!url) throw new Error('the daemon did not start its inspector');
    const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return new Inspector(ws);
  }

  call<T = any>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`inspector ${method} timed out`));
      }, CALL_TIMEOUT_MS);
      this.pending.set(id, { resolve, reject, timer });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** V8 heap in use, MiB (what is live plus garbage not yet collected). */
  async heapUsedMiB(): Promise<number> {
    const usage = await this.call<{ usedSize: number }>('Runtime.getHeapUsage');
    return usage.usedSize / 2 ** 20;
  }

  /** The daemon's own `process.memoryUsage()`, in MiB: heap, and memory outside it (Buffers, native). */
  async memoryUsage(): Promise<{ heapUsed: number; heapTotal: number; external: number; arrayBuffers: number }> {
    const { result } = await this.call<{ result: { value: Record<string, number> } }>('Runtime.evaluate', {
      expression: 'process.memoryUsage()', returnByValue: true, silent: true,
    });
    const mib = (key: string) => (result.value[key] ?? 0) / 2 ** 20;
    return { heapUsed: mib('heapUsed'), heapTotal: mib('heapTotal'), external: mib('external'), arrayBuffers: mib('arrayBuffers') };
  }

  /** A full collection, so the next heap figure counts only what is still reachable. */
  async collectGarbage(): Promise<void> {
    await this.call('HeapProfiler.collectGarbage');
  }

  async snapshot(file: string): Promise<void> {
    this.chunks = [];
    await this.call('HeapProfiler.enable');
    try {
      await this.call('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
      writeFileSync(file, this.chunks.join(''));
    } finally {
      this.chunks = undefined;
      await this.call('HeapProfiler.disable');
    }
  }

  /** Starts a histogram of the daemon's event loop delay (perf_hooks), read by loopDelay(). */
  async startLoopDelay(): Promise<void> {
    await this.evaluate(`globalThis.__corralLoopDelay = process.getBuiltinModule('node:perf_hooks').monitorEventLoopDelay({ resolution: 1 }); globalThis.__corralLoopDelay.enable(); true`);
  }

  /** The event loop delay since startLoopDelay(), in ms; the histogram is dropped. */
  async loopDelay(): Promise<{ p50: number; p99: number; max: number }> {
    return this.evaluate(`(() => { const h = globalThis.__corralLoopDelay; h.disable(); delete globalThis.__corralLoopDelay;
      return { p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6, max: h.max / 1e6 }; })()`);
  }

  async startProfile(): Promise<void> {
    await this.call('Profiler.enable');
    await this.call('Profiler.setSamplingInterval', { interval: 200 });
    await this.call('Profiler.start');
  }

  async stopProfile(file: string): Promise<void> {
    const { profile } = await this.call('Profiler.stop');
    await this.call('Profiler.disable');
    writeFileSync(file, JSON.stringify(profile));
  }

  private async evaluate<T>(expression: string): Promise<T> {
    const { result, exceptionDetails } = await this.call('Runtime.evaluate', { expression, returnByValue: true, silent: true });
    if (exceptionDetails) throw new Error(`inspector evaluation failed: ${exceptionDetails.exception?.description ?? exceptionDetails.text}`);
    return result.value as T;
  }

  close(): void {
    this.ws.close();
  }
}
