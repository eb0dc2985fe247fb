/**
 * Power changes of instances (start, stop, restart, freeze, unfreeze) and what follows them:
 * volatile.last_state.power, last_used_at, ephemeral deletion, lifecycle events. A light watcher
 * notices instances that stop on their own (halt inside, crash) without spawning anything.
 */
import { badRequest, instanceUrl, truthy, type ApiRequest, type DeviceMount, type InstanceStatus, type PluginContext } from '../../sdk/index.js';
import type { InstanceHandle } from './access.js';
import type { InstanceManager } from './manager.js';
import { applyVolatile } from './device-runtime.js';
import { mayShareImage } from './shared-rootfs.js';
import { LoopSlices } from '../../sdk/lib/loop-slices/index.js';

export type PowerAction = 'start' | 'stop' | 'restart' | 'freeze' | 'unfreeze';
export const POWER_ACTIONS: PowerAction[] = ['start', 'stop', 'restart', 'freeze', 'unfreeze'];

export interface PowerOptions {
  force: boolean;
  /** Seconds for a clean stop; -1 waits the instance's boot.host_shutdown_timeout... as the API says: forever is not offered. */
  timeout: number;
}

const WATCH_INTERVAL_MS = 1000;

/** Starts and stops call the family's hooks (`starting`, `launching`, `started`, `stopped`) for snapshots, templates and others. */
export class PowerControl {
  /** Instances this daemon believes are running, by key, with the handle they were started or adopted with. */
  private readonly watched = new Map<string, InstanceHandle>();
  private readonly stopping = new Set<string>();
  private timer?: NodeJS.Timeout;

  constructor(private readonly ctx: PluginContext, private readonly manager: InstanceManager) {}

  async status(handle: InstanceHandle): Promise<InstanceStatus> {
    return handle.driver.status(handle.inst);
  }

  async change(handle: InstanceHandle, action: PowerAction, opts: PowerOptions, req?: ApiRequest): Promise<void> {
    const status = await this.status(handle);
    switch (action) {
      case 'start':
        if (status === 'Running') throw badRequest('The instance is already running');
        if (status === 'Frozen') {
          await handle.driver.unfreeze(handle.inst);
          this.manager.lifecycle('instance-resumed', handle, req);
          return;
        }
        await this.start(handle, req);
        return;
      case 'stop':
        if (status === 'Stopped') throw badRequest('The instance is already stopped');
        await this.stop(handle, opts, req);
        return;
      case 'restart':
        if (status === 'Stopped') throw badRequest('The instance is not running');
        await this.stop(handle, opts, req, true);
        await this.start(await this.manager.load(handle.project, handle.name), req, true);
        this.manager.lifecycle('instance-restarted', handle, req);
        return;
      case 'freeze':
        if (status !== 'Running') throw badRequest(status === 'Frozen' ? 'The instance is already frozen' : 'The instance is not running');
        await handle.driver.freeze(handle.inst);
        this.manager.lifecycle('instance-paused', handle, req);
        return;
      case 'unfreeze':
        if (status !== 'Frozen') throw badRequest('The instance is not frozen');
        await handle.driver.unfreeze(handle.inst);
        this.manager.lifecycle('instance-resumed', handle, req);
        return;
    }
  }

  async start(handle: InstanceHandle, req?: ApiRequest, quiet = false): Promise<void> {
    const hooks = this.manager.hooks;
    // A container that may no longer share its image's files (now id-mapped or nesting) gets its rootfs whole first.
    if (handle.inst.type === 'container' && !mayShareImage(handle.inst.type, handle.inst.config)) {
      await this.manager.deps.storage.flattenVolume(handle.record.pool, { type: handle.inst.type, project: handle.project, name: handle.name });
    }
    await hooks.starting.promise(handle);
    const runtime = this.manager.deviceRuntime;
    const { runs: devices, volatile: deviceVolatile } = await runtime.startAll(handle);
    let volatile: Record<string, string> | void;
    try {
      await hooks.launching.promise(handle);
      const launch = { instance: handle, mounts: [] as DeviceMount[] };
      await hooks.launchMounts.promise(launch);
      volatile = await handle.driver.start(handle.inst, launch.mounts.length ? [...devices, { mounts: launch.mounts }] : devices);
    } catch (err) {
      await runtime.stopAll(handle);
      throw err;
    }
    const config = { ...handle.inst.config };
    applyVolatile(config, deviceVolatile);
    try {
      await runtime.startedAll(handle, devices, config);
    } catch (err) {
      await handle.driver.stop(handle.inst, { force: true, timeoutMs: 0 }).catch(() => undefined);
      await runtime.stopAll(handle, undefined, config);
      throw err;
    }
    const now = new Date().toISOString();
    await this.manager.touch(handle.project, handle.name, (r) => {
      Object.assign(r.config, volatile ?? {});
      applyVolatile(r.config, deviceVolatile);
      r.config['volatile.last_state.power'] = 'RUNNING';
      r.last_used_at = now;
    });
    this.watch(handle);
    if (!quiet) this.manager.lifecycle('instance-started', handle, req);
    this.manager.follow('started', () => hooks.started.call(handle));
  }

  async stop(handle: InstanceHandle, opts: PowerOptions, req?: ApiRequest, restarting = false): Promise<void> {
    const key = `${handle.project}/${handle.name}`;
    this.stopping.add(key);
    try {
      const timeoutMs = opts.timeout >= 0 ? opts.timeout * 1000 : 30_000;
      await handle.driver.stop(handle.inst, { force: opts.force, timeoutMs });
      await this.devicesStopped(handle);
    } finally {
      this.stopping.delete(key);
    }
    this.watched.delete(key);
    if (restarting) return;
    await this.afterStop(handle, req, opts.force ? 'instance-stopped' : 'instance-shutdown');
  }

  /** Device stop hooks after the instance stopped; their volatile changes (host names) are recorded. */
  private async devicesStopped(handle: InstanceHandle): Promise<void> {
    const volatile = await this.manager.deviceRuntime.stopAll(handle);
    if (Object.keys(volatile).length) await this.manager.touch(handle.project, handle.name, (r) => applyVolatile(r.config, volatile));
  }

  /** Record the new state, and delete an ephemeral instance. */
  private async afterStop(handle: InstanceHandle, req: ApiRequest | undefined, action: string): Promise<void> {
    await this.manager.touch(handle.project, handle.name, (r) => {
      r.config['volatile.last_state.power'] = 'STOPPED';
    });
    this.manager.lifecycle(action, handle, req);
    this.manager.follow('stopped', () => this.manager.hooks.stopped.call(handle));
    if (handle.record.ephemeral) {
      await this.manager.remove(await this.manager.load(handle.project, handle.name), req).catch((err) => {
        this.ctx.log.error({ err, instance: handle.name }, 'deleting an ephemeral instance failed');
      });
    }
  }

  watch(handle: InstanceHandle): void {
    this.watched.set(`${handle.project}/${handle.name}`, handle);
    this.timer ??= setInterval(() => void this.poll(), WATCH_INTERVAL_MS).unref();
  }

  forget(project: string, name: string): void {
    this.watched.delete(`${project}/${name}`);
  }

  /** Instances that stopped without us: shutdown from inside, or a crash. */
  private async poll(): Promise<void> {
    // Every second over every running instance (a /proc and a cgroup read each): 10–20 ms with a thousand.
    const slices = new LoopSlices();
    for (const [key, watched] of [...this.watched]) {
      await slices.between();
      if (this.stopping.has(key)) continue;
      // Nearly all of them still run: asked with the handle they started with, a running one costs its driver's
      // status and no store read or lock (a running instance cannot be renamed or moved). A stop is confirmed below.
      if ((await this.status(watched).catch(() => 'Stopped' as const)) !== 'Stopped') continue;
      const { project, name } = watched;
      await this.manager.lock.run(key, async () => {
        if (!this.watched.has(key) || this.stopping.has(key)) return;
        const handle = await this.manager.load(project, name).catch(() => undefined);
        if (!handle) {
          this.watched.delete(key);
          return;
        }
        if ((await this.status(handle)) !== 'Stopped') return;
        this.watched.delete(key);
        await this.devicesStopped(handle);
        await this.afterStop(handle, undefined, 'instance-shutdown');
      }).catch((err) => this.ctx.log.warn({ err }, 'instance watch failed'));
    }
  }

  stopWatching(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * At daemon start, once the API is open: adopt running instances, release the devices of those that
   * stopped while no daemon watched, start those marked autostart (or running at the last host
   * shutdown). Clients may act on the same instances meanwhile, so each decision is taken again under
   * the instance's lock on its record as it is then; a first look without the lock passes over the
   * many that need nothing.
   */
  async boot(): Promise<void> {
    const toStart: { project: string; name: string; priority: number; delay: number }[] = [];
    // With thousands of instances whose handles are cached, the walk would otherwise hold the loop throughout.
    const slices = new LoopSlices();
    for (const stored of await this.manager.localRecords()) {
      await slices.between();
      const seen = await this.manager.readHandle(stored).catch(() => undefined);
      if (!seen || !(await this.needsBootAction(seen))) continue;
      const { project, name } = seen;
      let running: InstanceHandle | undefined;
      await this.manager.lock.run(`${project}/${name}`, async () => {
        const handle = await this.manager.load(project, name).catch(() => undefined);
        if (!handle) return;
        const status = await this.status(handle).catch(() => 'Error' as const);
        if (status === 'Running' || status === 'Frozen') {
          this.watch(handle);
          running = handle;
          return;
        }
        if (hostSideDevices(handle)) await this.devicesStopped(handle);
        if (evacuatedHere(handle)) return;
        if (wantedAtBoot(handle)) {
          toStart.push({ project, name, priority: Number(handle.inst.config['boot.autostart.priority'] ?? 0), delay: Number(handle.inst.config['boot.autostart.delay'] ?? 0) });
        } else if (handle.record.ephemeral) {
          await this.manager.remove(handle).catch((err) => this.ctx.log.warn({ err }, 'ephemeral cleanup failed'));
        }
      }).catch((err) => this.ctx.log.warn({ err, instance: name }, 'checking an instance at boot failed'));
      // Outside the lock: following a host device plugs it under the instance's lock.
      if (running) await this.manager.deviceRuntime.adopt(running).catch((err) => this.ctx.log.warn({ err, instance: name }, 'adopting the host devices of a running instance failed'));
    }
    toStart.sort((a, b) => b.priority - a.priority);
    for (const { project, name, delay } of toStart) {
      await this.manager.lock.run(`${project}/${name}`, async () => {
        // Started, stopped or changed by a client since the walk: only what is still wanted and stopped.
        const handle = await this.manager.load(project, name).catch(() => undefined);
        if (!handle || !wantedAtBoot(handle) || (await this.status(handle)) !== 'Stopped') return;
        await this.start(handle);
      }).catch((err) => {
        this.ctx.log.error({ err, instance: name }, 'autostart failed');
        void this.ctx.warnings.raise({ type: 'Instance autostart failure', message: `${name}: ${(err as Error).message}`, project, entityUrl: instanceUrl(project, name) });
      });
      if (delay > 0) await new Promise((r) => setTimeout(r, delay * 1000));
    }
  }

  /** Whether boot() has anything to do for this instance as first seen: most stopped ones need nothing. */
  private async needsBootAction(handle: InstanceHandle): Promise<boolean> {
    if (hostSideDevices(handle) || wantedAtBoot(handle) || handle.record.ephemeral) return true;
    const status = await this.status(handle).catch(() => 'Error' as const);
    return status === 'Running' || status === 'Frozen';
  }

  /**
   * Host shutdown: stop running instances, highest boot.stop.priority first (same priority in
   * parallel), each given its boot.host_shutdown_timeout; they start again at the next boot.
   */
  async shutdownAll(): Promise<void> {
    this.stopWatching();
    const groups = new Map<number, InstanceHandle[]>();
    for (const stored of await this.manager.localRecords()) {
      const handle = await this.manager.handleFor(stored).catch(() => undefined);
      if (!handle || (await this.status(handle).catch(() => 'Stopped')) === 'Stopped') continue;
      const priority = Number(handle.inst.config['boot.stop.priority'] ?? 0);
      groups.set(priority, [...(groups.get(priority) ?? []), handle]);
    }
    for (const priority of [...groups.keys()].sort((a, b) => b - a)) {
      await Promise.all(groups.get(priority)!.map(async (handle) => {
        const timeout = Number(handle.inst.config['boot.host_shutdown_timeout'] ?? 30);
        await handle.driver.stop(handle.inst, { force: false, timeoutMs: timeout * 1000 }).catch((err) => this.ctx.log.error({ err, instance: handle.name }, 'shutdown stop failed'));
        this.manager.lifecycle('instance-shutdown', handle, undefined);
      }));
    }
  }
}

/** Device state on the host side (a NIC's host name): released when the instance is found stopped. */
function hostSideDevices(handle: InstanceHandle): boolean {
  return Object.keys(handle.record.config).some((k) => /^volatile\.[^.]+\.host_name$/.test(k));
}

/** Stopped by an evacuation of this member: it starts again when the member is restored, and is kept until then. */
function evacuatedHere(handle: InstanceHandle): boolean {
  return !!handle.record.config['volatile.evacuate.origin'];
}

/** Started at boot: `boot.autostart` when set, else whether it ran at the last host shutdown (not one evacuated). */
function wantedAtBoot(handle: InstanceHandle): boolean {
  if (evacuatedHere(handle)) return false;
  const autostart = handle.inst.config['boot.autostart'];
  return autostart !== undefined && autostart !== '' ? truthy(autostart) : handle.record.config['volatile.last_state.power'] === 'RUNNING';
}
