/**
 * The host kernel's device announcements (netlink uevents), read by a small resident helper
 * (corral-uevents, uevent-monitor.c, built by `npm run build`) for as long as some device follows
 * the host. No udev daemon is needed: the kernel's own messages carry the subsystem, the node's
 * name and its numbers. The helper is restarted if it dies; since announcements may have been
 * missed meanwhile, listeners are then told to look again (`rescan`).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { HostProcess, HostTools, PluginContext } from '../../sdk/index.js';

const HELPER_BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), 'corral-uevents');
const RESTART_DELAY_MS = 1000;

export interface Announcement {
  /** add, remove, change, move, bind, unbind. */
  action: string;
  subsystem: string;
  /** The node's name under /dev (`loop7`, `bus/usb/001/002`). */
  devname: string;
  major: number;
  minor: number;
}

/** An announcement, or `rescan` when some may have been lost. */
export type AnnouncementListener = (a: Announcement | 'rescan') => void;

/** Parses one helper line: `action@devpath` then KEY=VALUE fields, tab-separated. */
export function parseAnnouncement(line: string): Announcement | undefined {
  const [head, ...fields] = line.split('\t');
  if (!head?.includes('@')) return undefined;
  const env = new Map(fields.map((f) => [f.slice(0, f.indexOf('=')), f.slice(f.indexOf('=') + 1)] as const));
  const devname = env.get('DEVNAME');
  if (!devname) return undefined;
  return {
    action: env.get('ACTION') ?? head.slice(0, head.indexOf('@')),
    subsystem: env.get('SUBSYSTEM') ?? '',
    devname: devname.replace(/^\/dev\//, ''),
    major: Number(env.get('MAJOR') ?? -1),
    minor: Number(env.get('MINOR') ?? -1),
  };
}

export class HostAnnouncements {
  private readonly listeners = new Set<AnnouncementListener>();
  private helper?: HostProcess;
  private restartTimer?: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly tools: HostTools, private readonly log: PluginContext['log']) {}

  /** Listen until the returned function is called; the helper runs while anyone listens. */
  subscribe(listener: AnnouncementListener): () => void {
    this.listeners.add(listener);
    this.ensureRunning();
    return () => {
      this.listeners.delete(listener);
      if (!this.listeners.size) this.stopHelper();
    };
  }

  /** Whether the helper is running (tests and the bench look at its process). */
  get pid(): number | undefined {
    return this.helper?.pid;
  }

  close(): void {
    this.closed = true;
    this.listeners.clear();
    this.stopHelper();
  }

  private ensureRunning(): void {
    if (this.helper || this.restartTimer || this.closed) return;
    if (!existsSync(HELPER_BIN)) {
      this.log.warn({ helper: HELPER_BIN }, 'the uevent helper is not built: devices are given at start only, not as the host announces them');
      return;
    }
    const helper = this.tools.spawn(HELPER_BIN, [], { endWithDaemon: true });
    this.helper = helper;
    helper.stdin.end();
    helper.stderr?.on('data', (chunk: Buffer) => this.log.warn({ stderr: chunk.toString().trim() }, 'uevent helper'));
    const lines = createInterface({ input: helper.stdout });
    lines.on('line', (line) => {
      if (line === 'READY') return;
      const a = line === 'OVERFLOW' ? 'rescan' : parseAnnouncement(line);
      if (a) this.emit(a);
    });
    void helper.exited.then((code) => {
      if (this.helper !== helper) return;
      this.helper = undefined;
      if (this.closed || !this.listeners.size) return;
      this.log.warn({ code }, 'the uevent helper exited; restarting it');
      this.restartTimer = setTimeout(() => {
        this.restartTimer = undefined;
        this.ensureRunning();
        this.emit('rescan');
      }, RESTART_DELAY_MS);
      this.restartTimer.unref();
    });
  }

  private stopHelper(): void {
    clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    const helper = this.helper;
    this.helper = undefined;
    helper?.kill('SIGTERM');
  }

  private emit(a: Announcement | 'rescan'): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(a);
      } catch (err) {
        this.log.warn({ err }, 'a device announcement listener failed');
      }
    }
  }
}
