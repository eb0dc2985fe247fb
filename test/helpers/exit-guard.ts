/**
 * Loaded by ava into every test worker (the `require` option in package.json) so that no test file
 * can hold the run open. ava waits for each worker process to exit, and its inactivity timeout is
 * suspended while a test with a long `t.timeout` is running and is not armed again afterwards: a
 * worker that never exits, or a test that never ends, then stalls the whole run until CI gives up.
 * Here each file gets a budget for its tests, and once its tests are done the worker has a few
 * seconds to exit on its own (minutes when only timers are left, which end by themselves). Either
 * failure names what is still open and ends the worker with a non-zero code, which ava reports as
 * a failed file.
 */
import { registerCompletionHandler } from 'ava';
import { ChildProcess } from 'node:child_process';
import { Server, Socket } from 'node:net';

const minute = 60_000;
/** Long enough for the slowest file on a loaded CI machine; files that need more say so. */
const defaultBudgetMs = Number(process.env.CORRAL_TEST_FILE_BUDGET_MS) || 20 * minute;
const exitGraceMs = 15_000;
const timersGraceMs = 5 * minute;

const startedAt = Date.now();
let budgetMs = defaultBudgetMs;
let watchdog = arm();

function arm(): NodeJS.Timeout {
  // unref: the watchdog itself must never be what keeps a finished worker alive.
  return setTimeout(() => fail(`its tests were still running ${Math.round(budgetMs / minute)} min after the file started`), budgetMs - (Date.now() - startedAt)).unref();
}

/** A file whose tests legitimately take longer (a debootstrap from a mirror) raises its own budget. */
export function raiseFileBudget(ms: number): void {
  if (ms <= budgetMs) return;
  budgetMs = ms;
  clearTimeout(watchdog);
  watchdog = arm();
}

function describe(handle: unknown): string {
  if (handle instanceof ChildProcess) return `child process ${handle.pid} (${handle.spawnargs.join(' ').slice(0, 200)})`;
  if (handle instanceof Server) return `server listening on ${JSON.stringify(handle.address())}`;
  if (handle instanceof Socket) {
    if (handle === process.stdout || handle === process.stderr || handle === process.stdin) return '';
    return `socket ${handle.remoteAddress ? `to ${handle.remoteAddress}:${handle.remotePort}` : '(unix or pipe)'}`;
  }
  return (handle as object)?.constructor?.name ?? typeof handle;
}

/** Whether a handle keeps the event loop alive (an unref'd one does not hold the worker). */
function holdsLoop(handle: unknown): boolean {
  const h = handle as { hasRef?: () => boolean; _handle?: { hasRef?: () => boolean } };
  const ref = h.hasRef ?? h._handle?.hasRef?.bind(h._handle);
  return ref ? ref.call(h) : true;
}

function openHandles(): string[] {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles.filter(holdsLoop).map(describe).filter((d) => d !== '');
}

/**
 * Where each pending timer the worker's code made was set (library code included): when only timers
 * hold a finished worker, that is what names the culprit. Node's own internal timers are not seen.
 */
const timerOrigins = new Map<NodeJS.Timeout, string>();
function recordTimers(): void {
  const origin = () => (new Error().stack ?? '').split('\n').slice(3, 9).map((l) => l.trim()).join(' < ');
  const { setTimeout: setT, setInterval: setI, clearTimeout: clearT, clearInterval: clearI } = globalThis;
  const wrappedTimeout = ((fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    if (typeof fn !== 'function') return setT(fn, ms, ...args);
    const timer = setT((...a: unknown[]) => {
      timerOrigins.delete(timer);
      fn(...a);
    }, ms, ...args);
    timerOrigins.set(timer, origin());
    return timer;
  }) as typeof setTimeout;
  // timers/promises and util.promisify(setTimeout) keep working.
  Object.assign(wrappedTimeout, setT);
  const wrappedInterval = ((fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const timer = setI(fn, ms, ...args);
    if (typeof fn === 'function') timerOrigins.set(timer, origin());
    return timer;
  }) as typeof setInterval;
  globalThis.setTimeout = wrappedTimeout;
  globalThis.setInterval = wrappedInterval;
  globalThis.clearTimeout = ((t?: NodeJS.Timeout | string | number) => {
    if (t && typeof t === 'object') timerOrigins.delete(t);
    clearT(t);
  }) as typeof clearTimeout;
  globalThis.clearInterval = ((t?: NodeJS.Timeout | string | number) => {
    if (t && typeof t === 'object') timerOrigins.delete(t);
    clearI(t);
  }) as typeof clearInterval;
}
recordTimers();

/** The origins of the pending timers that hold the worker (those not unref'd), each once. */
function heldTimers(): string[] {
  const held = [...timerOrigins].filter(([timer]) => timer.hasRef()).map(([, where]) => where);
  return [...new Set(held)].slice(0, 8);
}

function fail(why: string): void {
  const open = openHandles();
  // Timers and pending requests are not handles: name their kinds too.
  const resources = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap');
  const timers = heldTimers();
  process.stderr.write(`exit-guard: ${why}; still open: ${open.length ? open.join('; ') : 'no handles'}; resources: ${resources.join(', ') || 'none'}${timers.length ? `; timers set at: ${timers.map((t) => `\n  ${t}`).join('')}` : ''}\n`);
  process.exit(1);
}

registerCompletionHandler(() => {
  clearTimeout(watchdog);
  setTimeout(() => {
    if (openHandles().length) fail(`the worker did not exit within ${exitGraceMs / 1000} s of its tests ending`);
    // Only timers left (a bound a test raced and never cleared): they end by themselves, unless one repeats.
    setTimeout(() => fail(`the worker's timers kept it ${timersGraceMs / minute} min after its tests ended`), timersGraceMs - exitGraceMs).unref();
  }, exitGraceMs).unref();
});
