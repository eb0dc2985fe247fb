/**
 * Device nodes of a container (unix-char, unix-block). A user namespace cannot make device nodes,
 * so each is made on the host, in `<dataDir>/devices/unix/<container>` (searchable by all: the container's
root resolves the mount source at start; the container directory is root's alone), owned by the host ids the container's
 * map gives its uid/gid, and bind-mounted at its path inside; the device cgroup lets the container
 * use it. At start that is config lines (mount entry, devices.allow); on a running container the
 * mount is injected and the rule written to its devices cgroup. What each device got is recorded
 * (unix-nodes.json) so an unplug or a stop after a daemon restart still undoes it.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { badRequest, internalError, type DeviceMount, type HostProcess, type HostTools, type IdmapEntry, type UnixNode } from '../../sdk/index.js';
import type { ContainerCgroup } from './cgroups.js';

const TIMEOUT_MS = 10_000;

export interface RecordedUnixNode {
  device: string;
  node: UnixNode;
  /** The node on the host (the bind mount's source). */
  hostPath: string;
  /** Added to a running container (its mount and cgroup rule are undone at unplug). */
  hotplugged: boolean;
}

/** The cgroup rule that lets the container read, write and mknod the node. */
export function cgroupRule(node: UnixNode): string {
  return `${node.kind} ${node.major}:${node.minor} rwm`;
}

/** Where a device's node lives on the host: one file per device and path. */
export function hostNodePath(nodesDir: string, device: string, inside: string): string {
  const flat = `${device}.${inside.replace(/^\/+/, '').replace(/\//g, '-')}`.replace(/[^A-Za-z0-9._-]/g, '_');
  // Readable, and unique: the flattening alone could give two devices one name.
  const hash = createHash('sha256').update(`${device}\0${inside}`).digest('hex').slice(0, 8);
  return path.join(nodesDir, `unix.${flat}.${hash}`);
}

/** The host id an id inside maps to; the id itself for a privileged container (empty map). */
export function hostId(map: IdmapEntry[], id: number, kind: 'uid' | 'gid'): number {
  if (!map.length) return id;
  for (const e of map) {
    if (!(kind === 'uid' ? e.Isuid : e.Isgid)) continue;
    if (id >= e.Nsid && id < e.Nsid + e.Maprange) return e.Hostid + (id - e.Nsid);
  }
  throw badRequest(`The ${kind} ${id} of a device node is outside the container's id map`);
}

export function bindMount(r: RecordedUnixNode): DeviceMount {
  return { source: r.hostPath, target: r.node.path, file: true };
}

/**
 * The nodes' directory, searchable by the container's root (it resolves the mount source at
 * start). `<dataDir>/devices` is shared with other device types: it only gains search permission.
 */
async function searchable(nodesDir: string): Promise<void> {
  await mkdir(nodesDir, { recursive: true, mode: 0o711 });
  await chmod(nodesDir, 0o711);
  await chmod(path.dirname(nodesDir), 0o711);
  const top = path.dirname(path.dirname(nodesDir));
  await chmod(top, ((await stat(top)).mode & 0o7777) | 0o001);
}

/**
 * A helper kept for the daemon's life makes the nodes (`ERR <path>` on failure, `END <n>` after
 * each batch): a process per node, or even per start, cost more than the container's start.
 * corral-mknod (mknod-helper.c, built by `npm run build`) makes them without any further process;
 * without it a shell runs mknod and chown per node, same lines. It ends with the daemon (its stdin
 * closes, or the parent-death signal).
 */
const HELPER_BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), 'corral-mknod');
const HELPER_SCRIPT = 'while read -r m k a b u g p; do if [ "$m" = END ]; then echo "END $k"; '
  + 'else { mknod -m "$m" "$p" "$k" "$a" "$b" && chown "$u:$g" "$p"; } 2>/dev/null || echo "ERR $p"; fi; done';

class MknodHelper {
  private proc: HostProcess | undefined;
  private buffered = '';
  private seq = 0;
  private waiting: { id: number; failed: string[]; done: (err?: Error) => void } | undefined;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly tools: HostTools) {}

  /** One batch at a time; resolves with the paths that could not be made. */
  make(lines: string[]): Promise<string[]> {
    const next = this.queue.then(() => this.batch(lines));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private batch(lines: string[]): Promise<string[]> {
    const proc = this.running();
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      const failed: string[] = [];
      const timer = setTimeout(() => {
        this.proc = undefined;
        proc.kill('SIGKILL');
        this.waiting?.done(new Error(`no answer in ${TIMEOUT_MS} ms`));
      }, TIMEOUT_MS);
      this.waiting = {
        id, failed,
        done: (err) => {
          clearTimeout(timer);
          this.waiting = undefined;
          if (err) reject(err);
          else resolve(failed);
        },
      };
      proc.stdin.write(`${lines.join('\n')}\nEND ${id}\n`);
    });
  }

  private running(): HostProcess {
    if (this.proc) return this.proc;
    const proc = existsSync(HELPER_BIN)
      ? this.tools.spawn(HELPER_BIN, [], { endWithDaemon: true })
      : this.tools.spawn('sh', ['-c', HELPER_SCRIPT], { endWithDaemon: true });
    proc.stdin.on('error', () => undefined);
    proc.stdout.setEncoding('utf8');
    // A helper given up on (timed out) speaks no more for the batches after it.
    proc.stdout.on('data', (chunk: string) => {
      if (this.proc === proc) this.read(chunk);
    });
    void proc.exited.then(() => {
      if (this.proc !== proc) return;
      this.proc = undefined;
      this.waiting?.done(new Error('the node helper exited'));
    });
    this.buffered = '';
    this.proc = proc;
    return proc;
  }

  private read(chunk: string): void {
    this.buffered += chunk;
    for (let nl = this.buffered.indexOf('\n'); nl >= 0; nl = this.buffered.indexOf('\n')) {
      const line = this.buffered.slice(0, nl);
      this.buffered = this.buffered.slice(nl + 1);
      if (!this.waiting) continue;
      if (line === `END ${this.waiting.id}`) this.waiting.done();
      else if (line.startsWith('ERR ')) this.waiting.failed.push(line.slice(4));
    }
  }
}

export class UnixNodeMaker {
  private readonly helper: MknodHelper;

  constructor(tools: HostTools) {
    this.helper = new MknodHelper(tools);
  }

  /** Make the nodes on the host, replacing what an earlier run left there. */
  async make(nodesDir: string, wanted: { device: string; node: UnixNode }[], map: IdmapEntry[]): Promise<RecordedUnixNode[]> {
    if (!wanted.length) return [];
    const made = wanted.map((w) => ({
      device: w.device, node: w.node, hostPath: hostNodePath(nodesDir, w.device, w.node.path), hotplugged: false,
      uid: hostId(map, w.node.uid, 'uid'), gid: hostId(map, w.node.gid, 'gid'),
    }));
    if (/[\r\n]/.test(nodesDir)) throw internalError('The data directory must not contain line breaks');
    await searchable(nodesDir);
    const removeAll = () => Promise.all(made.map((m) => rm(m.hostPath, { force: true })));
    await removeAll();
    // The path goes last: `read` gives the last field the rest of the line, spaces included.
    const lines = made.map((m) => `${(m.node.mode & 0o7777).toString(8)} ${m.node.kind} ${m.node.major} ${m.node.minor} ${m.uid} ${m.gid} ${m.hostPath}`);
    let failed: string[];
    try {
      failed = await this.helper.make(lines);
    } catch (err) {
      await removeAll();
      throw internalError(`Failed to make the device nodes: ${(err as Error).message}`);
    }
    if (failed.length) {
      await removeAll();
      const which = made.find((m) => m.hostPath === failed[0]);
      throw internalError(`Failed to make the device node for "${which?.node.path ?? failed[0]}"`);
    }
    return made.map(({ uid: _u, gid: _g, ...r }) => r);
  }

  async remove(r: RecordedUnixNode): Promise<void> {
    await rm(r.hostPath, { force: true });
  }
}

/**
 * Allow (or deny) the node in a running container's devices cgroup. Rules the container has from
 * its base config or from another of its nodes are kept at deny: its /dev/null must stay usable.
 */
export function writeCgroupRule(cgroup: ContainerCgroup | undefined, rule: string, allow: boolean): void {
  checkRuleWritable(cgroup);
  cgroup!.write('devices', allow ? 'devices.allow' : 'devices.deny', '', rule);
}

/** Live rules need the v1 devices controller: on cgroup2 only liblxc attaches the eBPF filter, at start. */
export function checkRuleWritable(cgroup: ContainerCgroup | undefined): void {
  if (!cgroup) throw internalError('The running container has no devices cgroup to allow the device in');
  if (cgroup.file('devices', 'devices.allow', 'devices.allow')?.version !== 1) {
    throw badRequest('Device nodes cannot be added to a running container on this host (no v1 devices cgroup): restart the instance instead');
  }
}
