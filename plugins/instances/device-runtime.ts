/**
 * Devices of running instances: their run configs at start, the `started` and `stop` hooks of
 * their types, their volatile keys, and hot-plug when a running instance's devices change. The
 * device type decides what a device is; the driver makes it; this file only sequences the two
 * and undoes earlier steps when a later one fails.
 */
import { isDeepStrictEqual } from 'node:util';
import {
  badRequest,
  type DeviceConfig, type DeviceRunConfig, type DeviceRunningContext, type DeviceStartContext, type DeviceType, type DriverInstance, type PluginContext,
} from '../../sdk/index.js';
import type { InstanceHandle } from './access.js';
import type { DeviceTypes } from './devices/device-types.js';
import type { FamilyHooks } from './hooks.js';
import { HostFollowers } from './host-followers.js';

/** Volatile key changes for the instance record; '' removes a key. */
export type VolatileChanges = Record<string, string>;

const prefix = (device: string) => `volatile.${device}.`;

/** Apply changes to a record's config (an empty value unsets the key). */
export function applyVolatile(config: Record<string, string>, changes: VolatileChanges): void {
  for (const [k, v] of Object.entries(changes)) {
    if (v === '') delete config[k];
    else config[k] = v;
  }
}

export class DeviceRuntime {
  /** Devices of running instances that follow the host; their re-plugs go through `onHostChange`. */
  readonly followers: HostFollowers;
  /** Set by the family: runs `replug` under the instance's lock. */
  onHostChange: (project: string, instance: string, device: string) => Promise<void> = async () => undefined;

  constructor(private readonly ctx: PluginContext, private readonly types: DeviceTypes) {
    this.followers = new HostFollowers((project, instance, device) => this.onHostChange(project, instance, device));
  }

  private type(name: string, config: DeviceConfig): DeviceType {
    const type = this.types.get(config.type);
    if (!type) throw badRequest(`Device "${name}": device type "${config.type}" is not enabled in this build`);
    return type;
  }

  /** What a device type is told about one device, with its volatile keys read from `config`. */
  context(handle: InstanceHandle, name: string, device: DeviceConfig, devices: Record<string, DeviceConfig>, config: Record<string, string>): DeviceStartContext {
    const volatile: Record<string, string> = {};
    for (const [k, v] of Object.entries(config)) if (k.startsWith(prefix(name))) volatile[k.slice(prefix(name).length)] = v;
    const takenNicNames = Object.entries(devices)
      .filter(([other, d]) => other !== name && d.type === 'nic')
      .map(([other, d]) => d.name || config[`${prefix(other)}name`])
      .filter((n): n is string => Boolean(n));
    return { project: handle.project, instanceName: handle.name, instanceType: handle.record.type, name, config: device, volatile, takenNicNames, devices };
  }

  private static prefixed(device: string, changes: Record<string, string> | void | undefined): VolatileChanges {
    const out: VolatileChanges = {};
    for (const [k, v] of Object.entries(changes ?? {})) out[`${prefix(device)}${k}`] = v;
    return out;
  }

  /** New instances and edits: their devices' volatile keys, tapped on the family's `creating` and `updating` hooks. */
  followInstances(hooks: FamilyHooks): void {
    hooks.creating.tap('devices', (draft) => this.prepareVolatile(draft, {}, draft.devices, draft.config));
    hooks.updating.tap('devices', ({ instance, before, after, config }) =>
      this.prepareVolatile({ project: instance.project, name: instance.name, type: instance.record.type }, before, after, config));
  }

  /**
   * Volatile keys follow device edits, as the reference keeps them: a device that goes away, or
   * changes type, loses its keys; a new one gets what its type prepares (a NIC's MAC address).
   * `config` (the record's own config) is changed in place.
   */
  prepareVolatile(target: { project: string; name: string; type: DriverInstance['type'] }, before: Record<string, DeviceConfig>, after: Record<string, DeviceConfig>, config: Record<string, string>): void {
    for (const [name, old] of Object.entries(before)) {
      if (after[name]?.type === old.type) continue;
      for (const k of Object.keys(config)) if (k.startsWith(prefix(name))) delete config[k];
    }
    const handle = { project: target.project, name: target.name, record: { type: target.type } } as InstanceHandle;
    for (const [name, device] of Object.entries(after)) {
      const type = this.types.get(device.type);
      if (!type?.prepare) continue;
      applyVolatile(config, DeviceRuntime.prefixed(name, type.prepare(this.context(handle, name, device, after, config))));
    }
  }

  /**
   * Run configs of every device, in device order. A NIC's name chosen by one device is taken for
   * the next. On failure the devices already started are stopped.
   */
  async startAll(handle: InstanceHandle): Promise<{ runs: DeviceRunConfig[]; volatile: VolatileChanges }> {
    const config = { ...handle.inst.config };
    const runs: DeviceRunConfig[] = [];
    const volatile: VolatileChanges = {};
    try {
      for (const [name, device] of Object.entries(handle.inst.devices)) {
        const run = await this.type(name, device).start(this.context(handle, name, device, handle.inst.devices, config));
        run.device = name;
        runs.push(run);
        const changes = DeviceRuntime.prefixed(name, run.volatile);
        Object.assign(volatile, changes);
        applyVolatile(config, changes);
      }
    } catch (err) {
      await this.stopAll(handle, runs.map((r) => r.device!));
      throw err;
    }
    return { runs, volatile };
  }

  /** The `started` hooks, once the instance runs; the caller stops the instance when one throws. */
  async startedAll(handle: InstanceHandle, runs: DeviceRunConfig[], config: Record<string, string>): Promise<void> {
    const pid = await handle.driver.initPid?.(handle.inst);
    if (pid === undefined) return;
    for (const run of runs) {
      const name = run.device!;
      const device = handle.inst.devices[name]!;
      const type = this.type(name, device);
      const running = { ...this.context(handle, name, device, handle.inst.devices, config), pid, run };
      if (type.started) await type.started(running);
      this.follow(handle, type, running);
    }
  }

  /** A device of a type that follows the host starts following it (once the instance runs with it). */
  private follow(handle: InstanceHandle, type: DeviceType, running: DeviceRunningContext, plugged: DeviceRunConfig | undefined = running.run): void {
    if (!type.followHost || !type.hotplug) return;
    this.followers.follow(handle.project, handle.name, running.name, plugged, (changed) => type.followHost!(running, changed));
  }

  /**
   * A running instance a restarted daemon adopts: its host-following devices follow again and
   * are plugged once more, as the host may have changed while no daemon watched.
   */
  async adopt(handle: InstanceHandle): Promise<void> {
    const pid = await handle.driver.initPid?.(handle.inst);
    if (pid === undefined) return;
    for (const [name, device] of Object.entries(handle.inst.devices)) {
      const type = this.types.get(device.type);
      if (!type?.followHost || !type.hotplug) continue;
      const running = { ...this.context(handle, name, device, handle.inst.devices, handle.inst.config), pid, run: { device: name } };
      this.follow(handle, type, running, undefined);
      await this.onHostChange(handle.project, handle.name, name);
    }
  }

  /**
   * The host changed under a following device: its run config is asked for again and, when it
   * differs from what the device was plugged with, the device is unplugged and plugged anew.
   * A failed plug leaves the device empty (logged), and the next change tries again.
   */
  async replug(handle: InstanceHandle, name: string): Promise<void> {
    if (!this.followers.isFollowing(handle.project, handle.name, name)) return;
    const device = handle.inst.devices[name];
    const type = device && this.types.get(device.type);
    const driver = handle.driver;
    if (!device || !type?.followHost || !driver.attachDevice || !driver.detachDevice) return this.followers.unfollow(handle.project, handle.name, name);
    const pid = await driver.initPid?.(handle.inst);
    // Stopped: the stop path ends the following.
    if (pid === undefined) return;
    const ctx = this.context(handle, name, device, handle.inst.devices, handle.inst.config);
    const run = await type.start(ctx);
    run.device = name;
    const last = this.followers.lastRun(handle.project, handle.name, name);
    if (last && isDeepStrictEqual(last, run)) return;
    // In place when the driver can and the type has no host-side hooks to run around it.
    if (driver.updateDevice && !type.started && !type.stop) {
      try {
        await driver.updateDevice(handle.inst, run);
        this.followers.plugged(handle.project, handle.name, name, run);
      } catch (err) {
        // What the driver could not change is left out; the next change tries again.
        this.followers.plugged(handle.project, handle.name, name, { device: name });
        this.ctx.log.warn({ err, instance: handle.name, device: name }, 'changing a device the host announced failed');
      }
      return;
    }
    await driver.detachDevice(handle.inst, name);
    await type.stop?.(ctx);
    try {
      await driver.attachDevice(handle.inst, run);
      await type.started?.({ ...ctx, pid, run });
      this.followers.plugged(handle.project, handle.name, name, run);
    } catch (err) {
      await driver.detachDevice(handle.inst, name).catch(() => undefined);
      this.followers.plugged(handle.project, handle.name, name, { device: name });
      this.ctx.log.warn({ err, instance: handle.name, device: name }, 'plugging a device the host announced failed');
    }
  }

  /** Stop hooks of the devices (all of them by default) after the instance stopped; failures are logged. */
  async stopAll(handle: InstanceHandle, only?: string[], config: Record<string, string> = handle.inst.config): Promise<VolatileChanges> {
    const volatile: VolatileChanges = {};
    if (!only) this.followers.unfollow(handle.project, handle.name);
    for (const [name, device] of Object.entries(handle.inst.devices)) {
      if (only && !only.includes(name)) continue;
      this.followers.unfollow(handle.project, handle.name, name);
      const type = this.types.get(device.type);
      if (!type?.stop) continue;
      try {
        Object.assign(volatile, DeviceRuntime.prefixed(name, await type.stop(this.context(handle, name, device, handle.inst.devices, config))));
      } catch (err) {
        this.ctx.log.warn({ err, instance: handle.name, device: name }, 'stopping a device failed');
      }
    }
    return volatile;
  }

  /**
   * A running instance's devices change from `before` to `after`: devices of hot-pluggable types
   * that went away or changed are unplugged, new or changed ones plugged. Types without hot-plug
   * take effect at the next start, as before. On failure what was done is undone.
   */
  async hotplug(handle: InstanceHandle, before: Record<string, DeviceConfig>, after: Record<string, DeviceConfig>, config: Record<string, string>): Promise<VolatileChanges> {
    const driver = handle.driver;
    const live = (name: string, d: DeviceConfig | undefined) => d !== undefined && this.types.get(d.type)?.hotplug === true;
    const changed = (name: string) => !isDeepStrictEqual(before[name], after[name]);
    const removed = Object.keys(before).filter((n) => changed(n) && live(n, before[n]));
    const added = Object.keys(after).filter((n) => changed(n) && live(n, after[n]));
    if (!removed.length && !added.length) return {};
    if (!driver.attachDevice || !driver.detachDevice) throw badRequest(`Devices cannot be changed while a ${handle.record.type} is running`);
    const pid = await driver.initPid?.(handle.inst);
    if (pid === undefined) throw badRequest('The instance is not running');
    const cfg = { ...config };
    const volatile: VolatileChanges = {};
    const note = (changes: VolatileChanges) => {
      Object.assign(volatile, changes);
      applyVolatile(cfg, changes);
    };
    const unplug = async (name: string, devices: Record<string, DeviceConfig>) => {
      this.followers.unfollow(handle.project, handle.name, name);
      await driver.detachDevice!(handle.inst, name);
      const type = this.type(name, devices[name]!);
      note(DeviceRuntime.prefixed(name, await type.stop?.(this.context(handle, name, devices[name]!, devices, cfg))));
    };
    const plug = async (name: string, devices: Record<string, DeviceConfig>) => {
      const type = this.type(name, devices[name]!);
      const ctx = this.context(handle, name, devices[name]!, devices, cfg);
      const run = await type.start(ctx);
      run.device = name;
      const changes = DeviceRuntime.prefixed(name, run.volatile);
      note(changes);
      try {
        await driver.attachDevice!(handle.inst, run);
        const running = { ...ctx, volatile: { ...ctx.volatile, ...(run.volatile ?? {}) }, pid, run };
        await type.started?.(running);
        this.follow(handle, type, running);
      } catch (err) {
        this.followers.unfollow(handle.project, handle.name, name);
        await driver.detachDevice!(handle.inst, name).catch(() => undefined);
        note(DeviceRuntime.prefixed(name, await type.stop?.(this.context(handle, name, devices[name]!, devices, cfg)).catch(() => undefined)));
        throw err;
      }
    };
    const unplugged: string[] = [];
    const plugged: string[] = [];
    try {
      for (const name of removed) {
        await unplug(name, before);
        unplugged.push(name);
      }
      for (const name of added) {
        await plug(name, after);
        plugged.push(name);
      }
    } catch (err) {
      for (const name of plugged.reverse()) await unplug(name, after).catch(() => undefined);
      for (const name of unplugged.reverse()) {
        await plug(name, before).catch((e) => this.ctx.log.warn({ err: e, device: name }, 'putting back an unplugged device failed'));
      }
      throw err;
    }
    return volatile;
  }
}
