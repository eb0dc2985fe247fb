/**
 * Host directories and filesystem volumes of a VM: each a 9p share (`virtio-9p-pci`) whose mount
 * tag comes from the device name. QEMU runs as root and shares with `security_model=passthrough`,
 * so owners and modes written on either side are the real ones on the host. The guest learns
 * what to mount where from the `mounts` file of its config share (one `tag path ro|rw` a line),
 * read by the test image's init at boot.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, type DeviceMount } from '../../sdk/index.js';
import { section, type ConfigSection } from './qemu-config.js';
import { qemuIdOf } from './vm-disks.js';

export interface Share {
  device: string;
  source: string;
  target: string;
  readonly: boolean;
  /** The 9p mount tag the guest mounts it by. */
  tag: string;
}

/** Linux reads a 9p mount tag of at most 31 bytes here (virtio's tag field as the guest sees it). */
const TAG_MAX = 31;

export function shareTag(device: string): string {
  const tag = `corral_${qemuIdOf(device)}`;
  if (tag.length <= TAG_MAX) return tag;
  return `corral_${createHash('sha256').update(device).digest('hex').slice(0, TAG_MAX - 7)}`;
}

/** The shares a device's mounts ask for (a missing optional source is skipped), or a 400. */
export function sharesOf(device: string, mounts: DeviceMount[]): Share[] {
  const out: Share[] = [];
  for (const m of mounts) {
    if (!existsSync(m.source)) {
      if (m.optional) continue;
      throw badRequest(`Device "${device}": source path "${m.source}" doesn't exist`);
    }
    if (!statSync(m.source).isDirectory()) throw badRequest(`Device "${device}": only a directory can be shared into a virtual machine ("${m.source}" is not one)`);
    // The guest reads the list by whitespace-separated fields.
    if (/\s/.test(m.target) || !path.isAbsolute(m.target)) throw badRequest(`Device "${device}": the path "${m.target}" cannot be mounted in a virtual machine (an absolute path without spaces is needed)`);
    out.push({ device, source: m.source, target: m.target, readonly: Boolean(m.readonly), tag: shareTag(device) });
  }
  return out;
}

export function shareSections(shares: Share[]): ConfigSection[] {
  return shares.flatMap((s) => [
    section('fsdev', `share-${qemuIdOf(s.device)}`, {
      fsdriver: 'local', path: s.source, security_model: 'passthrough', ...(s.readonly ? { readonly: 'on' } : {}),
    }),
    section('device', `dev-share-${qemuIdOf(s.device)}`, { driver: 'virtio-9p-pci', fsdev: `share-${qemuIdOf(s.device)}`, mount_tag: s.tag }),
  ]);
}

/** The list the guest's init mounts from (on the config share). */
export async function writeMountList(configDrive: string, shares: Share[]): Promise<void> {
  await writeFile(path.join(configDrive, 'mounts'), shares.map((s) => `${s.tag} ${s.target} ${s.readonly ? 'ro' : 'rw'}\n`).join(''));
}

/** Whether the VM got `device` as a share at its start (per the list on its config share). */
export function sharedAtStart(configDrive: string, device: string): boolean {
  try {
    const tag = shareTag(device);
    return readFileSync(path.join(configDrive, 'mounts'), 'utf8').split('\n').some((l) => l.split(' ')[0] === tag);
  } catch {
    return false;
  }
}
