/**
 * The seccomp notify proxy (seccomp-proxy/seccomp-proxy.c, built by `npm run build`): one process
 * per daemon, serving every container whose profile intercepts syscalls. liblxc's monitor connects
 * to its socket when such a container starts (and reconnects after a restart of the proxy), so the
 * proxy is started before the first such start, or at boot when one already runs, and started
 * again when it dies while containers may need it. It ends with the daemon (and, should the daemon
 * die without a word, by its parent-death signal).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { internalError } from '../../sdk/index.js';
import type { DriverLog } from './driver-log.js';

export const PROXY_BINARY = path.join(path.dirname(fileURLToPath(import.meta.url)), 'seccomp-proxy', 'corral-seccomp-proxy');

const READY_TIMEOUT_MS = 5_000;
const STOP_TIMEOUT_MS = 2_000;
/** Restarts after an unexpected exit: quickly, but never in a tight loop. */
const RESTART_DELAY_MS = 200;

export class SyscallInterceptor {
  private child?: ChildProcess;
  private starting?: Promise<void>;
  private stopped = false;
  private restartTimer?: NodeJS.Timeout;

  /** `lxcpath` holds each container's interception policy (`<name>/seccomp.intercept`, written at start). */
  constructor(readonly socket: string, private readonly lxcpath: string, private readonly log: DriverLog) {}

  /** The proxy's pid while it runs (tests count it). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Start the proxy unless it runs; resolves once it listens. */
  ensure(): Promise<void> {
    if (this.stopped) return Promise.reject(internalError('The daemon is shutting down'));
    if (this.child && !this.starting) return Promise.resolve();
    return (this.starting ??= this.launch().finally(() => (this.starting = undefined)));
  }

  private launch(): Promise<void> {
    if (!existsSync(PROXY_BINARY)) {
      return Promise.reject(internalError(`Syscall interception needs ${PROXY_BINARY}: build it with "npm run build" (gcc)`));
    }
    if (Buffer.byteLength(this.socket) >= 108) {
      return Promise.reject(internalError(`The seccomp proxy socket path is too long for a unix socket: ${this.socket}`));
    }
    return new Promise<void>((resolve, reject) => {
      const child = spawn(PROXY_BINARY, [this.socket, this.lxcpath], { stdio: ['ignore', 'pipe', 'pipe'] });
      this.child = child;
      let stderr = '';
      let ready = false;
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(internalError('The seccomp proxy did not start in time'));
      }, READY_TIMEOUT_MS);
      child.stdout!.on('data', (chunk: Buffer) => {
        if (!ready && chunk.toString().includes('ready')) {
          ready = true;
          clearTimeout(timer);
          resolve();
        }
      });
      child.stderr!.on('data', (chunk: Buffer) => {
        stderr = `${stderr}${chunk}`.slice(-2000);
        this.log.warn({ proxy: chunk.toString().trim() }, 'seccomp proxy');
      });
      child.on('error', (err) => {
        clearTimeout(timer);
        reject(internalError(`The seccomp proxy could not run: ${err.message}`));
      });
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        if (this.child === child) this.child = undefined;
        if (!ready) {
          reject(internalError(`The seccomp proxy exited before listening: ${stderr.trim() || `code ${code ?? signal}`}`));
          return;
        }
        if (this.stopped) return;
        this.log.warn({ code, signal }, 'the seccomp proxy exited: starting it again');
        this.restartTimer = setTimeout(() => {
          this.restartTimer = undefined;
          this.ensure().catch((err) => this.log.error({ err }, 'the seccomp proxy could not be restarted'));
        }, RESTART_DELAY_MS);
      });
    });
  }

  /** At daemon shutdown: the proxy ends (containers keep running; their monitors reconnect to the next one). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    await this.starting?.catch(() => undefined);
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  }
}
