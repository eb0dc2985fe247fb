/**
 * The guest sockets of the running containers: one directory per instance under
 * `<dataDir>/devlxd/`, bind-mounted at `/dev/lxd`, holding the socket its endpoint listens on.
 * The directory (not the socket) is mounted so that a restarted daemon can make a new socket in
 * it that the running container reaches at once.
 */
import { chmodSync, mkdirSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { truthy, type DeviceMount, type InstancesService, type InstanceSubject, type InstanceSummary, type PluginContext } from '../../sdk/index.js';
import type { GuestView } from './changes.js';
import { GuestEndpoint, type EndpointDeps } from './endpoint.js';

export const GUEST_MOUNT_TARGET = '/dev/lxd';

/** `security.devlxd` is on unless set false. */
export const devlxdEnabled = (config: Record<string, string>): boolean => !config['security.devlxd'] || truthy(config['security.devlxd']);

const keyOf = (project: string, name: string) => `${project}/${name}`;

/** Guest sockets opened at once when a daemon starts with containers running. */
const RESUME_IN_FLIGHT = 16;

const isRunning = (inst: InstanceSummary) => inst.expandedConfig['volatile.last_state.power'] === 'RUNNING';

export class GuestSockets {
  /** The sockets' parent directory exists with its mode (made by the first open). */
  private rootReady = false;
  private readonly endpoints = new Map<string, GuestEndpoint>();
  /** While resume() runs: the instances stopped or removed since it listed them (not to be opened again). */
  private resumeSkip: Set<string> | undefined;
  /** Set at daemon stop: nothing opens any more. */
  private closed = false;
  private refreshing: Promise<void> = Promise.resolve();
  /** Per instance, the last socket change in flight: a stop's cleanup must finish before the next start makes its socket. */
  private readonly pending = new Map<string, Promise<unknown>>();

  constructor(
    private readonly root: string,
    private readonly deps: EndpointDeps,
    private readonly instances: () => InstancesService | undefined,
    private readonly log: PluginContext['log'],
  ) {}

  dirOf(project: string, name: string): string {
    return path.join(this.root, `${project}_${name}`);
  }

  find(project: string, name: string): GuestEndpoint | undefined {
    return this.endpoints.get(keyOf(project, name));
  }

  /** A container starts: listen, and answer the mount that brings the socket's directory inside (none when disabled). */
  async launch(subject: InstanceSubject): Promise<DeviceMount | undefined> {
    const { inst } = subject;
    if (inst.type !== 'container') return undefined;
    const view = { config: inst.config, devices: inst.devices };
    if (!devlxdEnabled(inst.config)) {
      await this.forget(subject.project, subject.name);
      return undefined;
    }
    const endpoint = await this.open(subject.project, subject.name, view);
    return { source: endpoint.dir, target: GUEST_MOUNT_TARGET };
  }

  private serial<T>(project: string, name: string, work: () => Promise<T>): Promise<T> {
    const key = keyOf(project, name);
    const run = (this.pending.get(key) ?? Promise.resolve()).catch(() => undefined).then(work);
    const settled = run.catch(() => undefined);
    this.pending.set(key, settled);
    void settled.then(() => {
      if (this.pending.get(key) === settled) this.pending.delete(key);
    });
    return run;
  }

  private open(project: string, name: string, view: GuestView): Promise<GuestEndpoint> {
    return this.serial(project, name, () => this.openNow(project, name, view));
  }

  private async openNow(project: string, name: string, view: GuestView): Promise<GuestEndpoint> {
    const key = keyOf(project, name);
    let endpoint = this.endpoints.get(key);
    if (!endpoint) {
      // Mode 0755 all the way: the container's (mapped) root must traverse to bind-mount it (the root once).
      if (!this.rootReady) {
        mkdirSync(this.root, { recursive: true, mode: 0o755 });
        chmodSync(this.root, 0o755);
        this.rootReady = true;
      }
      const dir = this.dirOf(project, name);
      mkdirSync(dir, { recursive: true, mode: 0o755 });
      chmodSync(dir, 0o755);
      endpoint = new GuestEndpoint(project, name, dir, view, this.deps);
      this.endpoints.set(key, endpoint);
    } else {
      endpoint.update(view);
    }
    await endpoint.listen();
    return endpoint;
  }

  /** The instance stopped or is gone: no socket, no directory. */
  forget(project: string, name: string): Promise<void> {
    this.resumeSkip?.add(keyOf(project, name));
    return this.serial(project, name, async () => {
      const key = keyOf(project, name);
      const endpoint = this.endpoints.get(key);
      this.endpoints.delete(key);
      await endpoint?.close();
      await rm(this.dirOf(project, name), { recursive: true, force: true });
    });
  }

  /**
   * Read the instance again after a change (its own edit, a profile's): guests hear the change,
   * and `security.devlxd` turned off closes the socket at once; turned on again, the socket comes
   * back only if the directory is mounted (the container was started with it).
   */
  refresh(project: string, names?: string[]): Promise<void> {
    // One at a time: a slower, older read finishing last would take the guests' view back (and tell them so).
    const run = this.refreshing.then(() => this.refreshNow(project, names));
    this.refreshing = run.catch(() => undefined);
    return run;
  }

  private async refreshNow(project: string, names?: string[]): Promise<void> {
    const wanted = [...this.endpoints.values()].filter((e) => e.project === project && (!names || names.includes(e.name)));
    for (const endpoint of wanted) {
      // The instance alone is read: an update costs what that instance needs, not its project's size.
      const summary = await this.readOne(endpoint.project, endpoint.name);
      if (!summary) continue;
      await this.serial(endpoint.project, endpoint.name, async () => {
        if (this.find(endpoint.project, endpoint.name) !== endpoint) return; // stopped meanwhile
        endpoint.update({ config: summary.expandedConfig, devices: summary.expandedDevices });
        if (!devlxdEnabled(summary.expandedConfig)) await endpoint.close();
        else if (!endpoint.listening) await endpoint.listen();
      });
    }
  }

  private async readOne(project: string, name: string): Promise<InstanceSummary | undefined> {
    const instances = this.instances();
    if (!instances) return undefined;
    if (instances.get) return instances.get(project, name);
    return (await instances.list(project)).find((i) => i.name === name);
  }

  /** A profile changed: any running container may see it (another project's too, with `features.profiles=false`). */
  async refreshAll(): Promise<void> {
    for (const project of new Set([...this.endpoints.values()].map((e) => e.project))) await this.refresh(project);
  }

  /**
   * Daemon start: every running container that was started with its directory gets its socket back.
   * The API does not wait for it (see index.ts): making a socket file costs about a millisecond and a
   * half on a disk-backed file system, which with a thousand containers running was most of a restart.
   * Each socket is opened from the instance as it is then, unless its container stopped meanwhile or
   * a start already opened it.
   */
  async resume(): Promise<void> {
    // The directories left by the last daemon name the containers that had a socket: only those are
    // read (a listing would summarise every instance, thousands of stopped ones among them). Neither
    // project nor instance names may hold a `_`: the one in a directory's name parts them.
    const entries = await readdir(this.root).catch(() => [] as string[]);
    const wanted = entries.flatMap((entry) => {
      const at = entry.indexOf('_');
      return at > 0 ? [{ project: entry.slice(0, at), name: entry.slice(at + 1) }] : [];
    });
    this.resumeSkip = new Set();
    let next = 0;
    await Promise.all(Array.from({ length: Math.min(RESUME_IN_FLIGHT, wanted.length) }, async () => {
      while (next < wanted.length && !this.closed) {
        const { project, name } = wanted[next++]!;
        await this.serial(project, name, async () => {
          const key = keyOf(project, name);
          if (this.closed || this.resumeSkip?.has(key) || this.endpoints.has(key)) return;
          const now = await this.readOne(project, name);
          if (!now || now.type !== 'container' || !isRunning(now) || !devlxdEnabled(now.expandedConfig)) return;
          const endpoint = await this.openNow(project, name, { config: now.expandedConfig, devices: now.expandedDevices });
          // The daemon began to stop while this one was opening: closeAll() did not see it.
          if (this.closed) {
            this.endpoints.delete(key);
            await endpoint.close();
          }
        }).catch((err) => this.log.warn({ err, instance: name }, 'the guest socket could not listen again'));
      }
    }));
    this.resumeSkip = undefined;
  }

  /** Daemon stop: sockets close; the directories stay, mounted in the running containers. */
  async closeAll(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.endpoints.values()].map((e) => e.close()));
    this.endpoints.clear();
  }
}
