/**
 * Running containers' live state through corral-livestate (live-state.c): one helper process, kept
 * while reads come, asked one line per container (its init's pid and the cgroup files to read). Two
 * rtnetlink dumps in the container's network namespace replace the four /proc/<pid>/net files and the
 * sysfs reads per interface of network-state.ts (~35 µs against ~220 µs a container), and all of the
 * reads run beside the event loop, on another core. Whenever the helper cannot answer (not built,
 * gone, too slow, or the namespace unreadable), the caller reads the files itself: answers stay the
 * same, only slower.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HostProcess, HostTools, NetworkState } from '../../sdk/index.js';
import { linkType, sortedByText, IFF_UP } from './network-state.js';

const HELPER_BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), 'corral-livestate');
/** One answer takes ~35 µs; a helper this late is stuck (its own socket reads are bounded at 1 s). */
const ANSWER_BOUND_MS = 3_000;
/** A helper nobody asked for this long is let go (an idle daemon keeps no extra process). */
const IDLE_MS = 5_000;
/** A helper that keeps dying (or stalling) is not started again: /proc it is, from then on. */
const MAX_DEATHS = 5;

/** What the helper told of one container. */
export interface LiveState {
  network: Record<string, NetworkState>;
  /** Contents of the files asked, by path; undefined for one that could not be read. */
  files: Map<string, string | undefined>;
}

type Answer = LiveState | undefined;

/** rtnetlink's address scopes as the API names them. */
function scopeName(scope: number): string {
  if (scope === 254) return 'local';
  if (scope === 253) return 'link';
  return 'global';
}

const ipv4Value = (a: string) => a.split('.').reduce((n, p) => n * 256 + Number(p), 0);

interface Link { name: string; state: NetworkState }

/** The answer for one container, from the helper's lines (the format is in live-state.c). */
export function parseLiveState(lines: readonly string[], asked: readonly string[]): LiveState {
  const files = new Map<string, string | undefined>();
  for (const line of lines) {
    if (!line.startsWith('F ')) continue;
    const [, n, content] = line.split(' ');
    const file = asked[Number(n)];
    if (file !== undefined) files.set(file, content === '-' ? undefined : Buffer.from(content!, 'hex').toString('utf8'));
  }
  return { network: parseNetwork(lines), files };
}

function parseNetwork(lines: readonly string[]): Record<string, NetworkState> {
  const links = new Map<string, Link>();
  const v4 = new Map<string, { value: number; address: NetworkState['addresses'][number] }[]>();
  const v6 = new Map<string, NetworkState['addresses'][number][]>();
  for (const line of lines) {
    const f = line.split(' ');
    if (f[0] === 'L' && f.length === 14) {
      const flags = Number(f[3]);
      const hwaddr = f[5] === '-' || /^[0:]*$/.test(f[5]!) ? '' : f[5]!;
      const n = f.slice(6).map(Number) as [number, number, number, number, number, number, number, number];
      links.set(f[1]!, {
        name: Buffer.from(f[2]!, 'hex').toString('utf8'),
        state: {
          addresses: [],
          counters: {
            bytes_received: n[0], bytes_sent: n[1], packets_received: n[2], packets_sent: n[3],
            errors_received: n[4], errors_sent: n[5], packets_dropped_outbound: n[7], packets_dropped_inbound: n[6],
          },
          hwaddr, host_name: '', mtu: Number(f[4]), state: flags & IFF_UP ? 'up' : 'down', type: linkType(flags),
        },
      });
    } else if (f[0] === 'A' && f.length === 6) {
      const address = { family: f[2] === '4' ? 'inet' : 'inet6', address: f[3]!, netmask: f[4]!, scope: scopeName(Number(f[5])) };
      if (f[2] === '4') v4.set(f[1]!, [...(v4.get(f[1]!) ?? []), { value: ipv4Value(f[3]!), address }]);
      else v6.set(f[1]!, [...(v6.get(f[1]!) ?? []), address]);
    }
  }
  const out: Record<string, NetworkState> = {};
  // As network-state.ts lists them: interfaces by name, IPv4 addresses (in order) before IPv6.
  for (const [index, link] of [...links].sort((a, b) => (a[1].name < b[1].name ? -1 : a[1].name > b[1].name ? 1 : 0))) {
    const ipv4 = (v4.get(index) ?? []).sort((a, b) => a.value - b.value).map((e) => e.address);
    out[link.name] = { ...link.state, addresses: [...ipv4, ...sortedByText(v6.get(index) ?? [])] };
  }
  return out;
}

export class LiveStateReader {
  private helper: HostProcess | undefined;
  /** Helpers that died or stalled (one let go when idle does not count). */
  private deaths = 0;
  private idle: NodeJS.Timeout | undefined;
  /** Asked pids in order, each with the lines gathered so far. */
  private readonly waiting: { lines: string[]; files: readonly string[]; done: (answer: Answer) => void; timer: NodeJS.Timeout }[] = [];

  constructor(private readonly tools: HostTools, private readonly bin = HELPER_BIN) {}

  /**
   * The interfaces of `pid`'s network namespace and the contents of `files`, or undefined when the
   * helper could not tell.
   */
  read(pid: number, files: readonly string[] = []): Promise<Answer> {
    // A path the line format cannot carry is read by the caller.
    if (files.some((f) => /[\t\n]/.test(f))) return Promise.resolve(undefined);
    const helper = this.running();
    if (!helper) return Promise.resolve(undefined);
    this.idle?.refresh();
    return new Promise<Answer>((resolve) => {
      const timer = setTimeout(() => this.failed(helper), ANSWER_BOUND_MS);
      this.waiting.push({ lines: [], files, done: resolve, timer });
      helper.stdin.write(`${[pid, ...files].join('\t')}\n`);
    });
  }

  /** At shutdown: the helper goes now, and whoever still waits reads /proc. */
  stop(): void {
    const helper = this.helper;
    if (helper) this.abandon(helper);
  }

  private running(): HostProcess | undefined {
    if (this.helper) return this.helper;
    if (this.deaths >= MAX_DEATHS || !existsSync(this.bin)) return undefined;
    // It ends with the daemon by itself (its parent death signal), and when its input closes.
    const helper = this.tools.spawn(this.bin, []);
    this.helper = helper;
    this.idle = setTimeout(() => this.letGo(helper), IDLE_MS);
    this.idle.unref();
    // Whole lines, split here: readline's events per line were a third of the parsing. The helper writes
    // ASCII only. Lines of a helper given up on (late answers) are not this one's.
    let partial = '';
    helper.stdout.setEncoding('latin1');
    helper.stdout.on('data', (chunk: string) => {
      if (this.helper !== helper) return;
      const text = partial + chunk;
      const end = text.lastIndexOf('\n');
      partial = text.slice(end + 1);
      if (end >= 0) for (const line of text.slice(0, end).split('\n')) this.onLine(line);
    });
    // Its stderr is not read by anyone: drained so it can never block.
    helper.stderr?.resume();
    void helper.exited.then(() => this.failed(helper));
    return helper;
  }

  private onLine(line: string): void {
    const head = this.waiting[0];
    if (!head) return;
    if (line !== 'E' && !line.startsWith('X ')) {
      head.lines.push(line);
      return;
    }
    this.waiting.shift();
    clearTimeout(head.timer);
    head.done(line === 'E' ? parseLiveState(head.lines, head.files) : undefined);
  }

  /** Idle: its input closes and it exits; a read meanwhile keeps it. */
  private letGo(helper: HostProcess): void {
    if (this.helper !== helper) return;
    if (this.waiting.length) return void this.idle?.refresh();
    this.helper = undefined;
    helper.stdin.end();
  }

  /** The helper died or stalled while it was the one in use. */
  private failed(helper: HostProcess): void {
    if (this.helper !== helper) return;
    this.deaths++;
    this.abandon(helper);
  }

  /** Everyone waiting falls back to /proc; the next read starts a new helper. */
  private abandon(helper: HostProcess): void {
    if (this.helper === helper) {
      this.helper = undefined;
      clearTimeout(this.idle);
    }
    helper.kill('SIGKILL');
    for (const w of this.waiting.splice(0)) {
      clearTimeout(w.timer);
      w.done(undefined);
    }
  }
}
