/**
 * The tree the file API works on: the instance's root filesystem with its disk devices mounted
 * into it, as the container sees them, whether it runs or not. The mounts are what the disk
 * device type asks the driver for at start, so the two cannot disagree.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { DeviceConfig, IdmapEntry } from '../../../sdk/index.js';
import type { InstanceHandle } from '../access.js';
import type { DeviceRuntime } from '../device-runtime.js';
import type { DeviceTypes } from '../devices/device-types.js';
import { isRootDisk } from '../devices/disk.js';
import type { ContainerTree, IdTranslation, TreeMount } from './root-fs.js';

/** The id the kernel shows for a host id the instance's map leaves out. */
const OVERFLOW_ID = 65534;

function parseIdmap(text: string | undefined): IdmapEntry[] {
  if (!text) return [];
  try {
    const value = JSON.parse(text) as unknown;
    return Array.isArray(value) ? value.filter((e): e is IdmapEntry => typeof e?.Hostid === 'number' && typeof e?.Nsid === 'number' && typeof e?.Maprange === 'number') : [];
  } catch {
    return [];
  }
}

/**
 * Ids of an unprivileged instance as a host directory mounted without shifting holds them (host
 * ids); undefined for a privileged instance, whose ids are the host's.
 */
export function idTranslation(config: Record<string, string>): IdTranslation | undefined {
  // The map in effect while it runs; the one its next start uses while it is stopped.
  const map = parseIdmap(config['volatile.idmap.current']);
  const entries = map.length ? map : parseIdmap(config['volatile.idmap.next']);
  if (!entries.length) return undefined;
  const applies = (e: IdmapEntry, kind: 'uid' | 'gid') => (kind === 'uid' ? e.Isuid : e.Isgid);
  return {
    toDisk(id, kind) {
      const e = entries.find((x) => applies(x, kind) && id >= x.Nsid && id < x.Nsid + x.Maprange);
      return e ? e.Hostid + (id - e.Nsid) : undefined;
    },
    toContainer(id, kind) {
      const e = entries.find((x) => applies(x, kind) && id >= x.Hostid && id < x.Hostid + x.Maprange);
      return e ? e.Nsid + (id - e.Hostid) : OVERFLOW_ID;
    },
  };
}

/**
 * Root filesystem and mounted directories and files of a container. A disk whose source cannot
 * be found (an optional host path, a volume gone from a stopped instance) is left out: the path
 * then shows what is underneath, as in a container started without it.
 */
export async function containerTree(handle: InstanceHandle, types: DeviceTypes, runtime: DeviceRuntime): Promise<ContainerTree> {
  const disk = types.get('disk');
  const devices: Record<string, DeviceConfig> = handle.inst.devices;
  const mounts: { mount: TreeMount; depth: number }[] = [];
  const ids = idTranslation(handle.inst.config);
  for (const [name, device] of Object.entries(devices)) {
    if (device.type !== 'disk' || isRootDisk(device) || !disk) continue;
    const run = await disk.start(runtime.context(handle, name, device, devices, handle.inst.config)).catch(() => undefined);
    for (const m of run?.mounts ?? []) {
      if (!existsSync(m.source)) continue;
      const target = path.posix.normalize(m.target).replace(/(.)\/+$/, '$1');
      if (target === '/') continue;
      mounts.push({
        mount: { target, source: m.source, file: Boolean(m.file), readonly: Boolean(m.readonly), ids: m.shift ? undefined : ids },
        depth: target.split('/').length,
      });
    }
  }
  // Shallower first, as they are mounted: a later mount at the same path is the one seen.
  mounts.sort((a, b) => a.depth - b.depth);
  return { root: handle.rootfs, mounts: mounts.map((m) => m.mount) };
}
