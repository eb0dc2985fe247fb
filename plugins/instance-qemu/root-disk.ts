/**
 * The root disk of a VM: a raw file (`root.img`) in its volume, cloned from the image's and grown
 * (sparse: a grown file takes no space until written) to the root disk device's `size`, 10GiB by
 * default as the reference's. It never shrinks: a size below what the image needs is refused. An
 * empty VM (`lxc init --empty --vm`) gets a blank disk, which boots into its firmware.
 */
import { stat, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, BLOCK_IMAGE, parseSize, type DeviceConfig } from '../../sdk/index.js';

export const DEFAULT_ROOT_SIZE = 10 * 1024 ** 3;

export function rootDiskSize(devices: Record<string, DeviceConfig>): number {
  const root = Object.values(devices).find((d) => d.type === 'disk' && d.path === '/' && !d.source);
  if (!root?.size) return DEFAULT_ROOT_SIZE;
  try {
    return parseSize(root.size);
  } catch (err) {
    throw badRequest(`Invalid root disk size: ${(err as Error).message}`);
  }
}

/** Grows the volume's root disk to `size`; an empty VM (no image) gets a blank disk of that size. */
export async function growRootDisk(volumePath: string, size: number): Promise<void> {
  const file = path.join(volumePath, BLOCK_IMAGE);
  const st = await stat(file).catch(() => undefined);
  if (!st) {
    await writeFile(file, '', { flag: 'wx', mode: 0o600 });
    await truncate(file, Math.ceil(size / 512) * 512);
    return;
  }
  if (size < st.size) {
    throw badRequest(`The root disk size ${size} bytes is smaller than the image's disk (${st.size} bytes): give "size" of at least that`);
  }
  // Whole sectors only: a block device has no partial sector.
  const rounded = Math.ceil(size / 512) * 512;
  if (rounded > st.size) await truncate(file, rounded);
}
