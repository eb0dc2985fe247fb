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
import { chmod, chown, mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, internalError, type DeviceMount, type HostTools, type IdmapEntry, type UnixNode } from '../../sdk/index.js';
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

/** One shell makes all the nodes of a start: a process per node would cost more than the start itself. */
const MKNOD_ALL = 'while [ $# -gt 0 ]; do mknod -m "$2" "$1" "$3" "$4" "$5" || exit 1; shift 5; done';

export class UnixNodeMaker {
  constructor(private readonly tools: HostTools) {}

  /** Make the nodes on the host, replacing what an earlier run left there. */
  async make(nodesDir: string, wanted: { device: string; node: UnixNode }[], map: IdmapEntry[]): Promise<RecordedUnixNode[]> {
    if (!wanted.length) return [];
    const made = wanted.map((w) => ({
      device: w.device, node: w.node, hostPath: hostNodePath(nodesDir, w.device, w.node.path), hotplugged: false,
      uid: hostId(map, w.node.uid, 'uid'), gid: hostId(map, w.node.gid, 'gid'),
    }));
    await searchable(nodesDir);
    await Promise.all(made.map((m) => rm(m.hostPath, { force: true })));
    const args = made.flatMap((m) => [m.hostPath, (m.node.mode & 0o7777).toString(8), m.node.kind, String(m.node.major), String(m.node.minor)]);
    const res = await this.tools.run('sh', ['-c', MKNOD_ALL, 'sh', ...args], { timeoutMs: TIMEOUT_MS, allowFailure: true });
    if (res.exitCode !== 0) {
      await Promise.all(made.map((m) => rm(m.hostPath, { force: true })));
      throw internalError(`Failed to make the device nodes: ${res.stderr.trim() || `exit code ${res.exitCode}`}`);
    }
    await Promise.all(made.map((m) => chown(m.hostPath, m.uid, m.gid)));
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
