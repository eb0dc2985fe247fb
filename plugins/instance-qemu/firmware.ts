/**
 * Firmware for VMs that do not boot a kernel directly: UEFI through OVMF (its secure-boot build
 * with Microsoft's keys enrolled when `security.secureboot` is on, the default), or SeaBIOS,
 * QEMU's built-in BIOS, under `security.csm`. The UEFI variable store is the VM's own, kept in
 * its volume (`qemu.nvram`) so that boot entries survive restarts and travel with the volume.
 */
import { existsSync } from 'node:fs';
import { copyFile } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, truthy } from '../../sdk/index.js';

export interface Firmware {
  name: string;
  code: string;
  vars: string;
  secureBoot: boolean;
}

const OVMF_DIRS = ['/usr/share/OVMF', '/usr/share/ovmf', '/usr/share/qemu'];

function find(names: string[]): string | undefined {
  for (const dir of OVMF_DIRS) for (const n of names) if (existsSync(path.join(dir, n))) return path.join(dir, n);
  return undefined;
}

/** undefined: SeaBIOS (QEMU's default firmware). */
export async function firmwareFor(config: Record<string, string>, volumePath: string): Promise<Firmware | undefined> {
  if (truthy(config['security.csm'])) return undefined;
  const secureBoot = truthy(config['security.secureboot'] ?? 'true');
  // The image says its bootloader is unsigned (`requirements.secureboot: "false"`, kept as an image.* key).
  if (secureBoot && config['image.requirements.secureboot'] === 'false') {
    throw badRequest('This VM\'s image does not boot under secure boot (its requirements.secureboot is false): set security.secureboot=false on the instance');
  }
  const code = find(secureBoot ? ['OVMF_CODE_4M.ms.fd', 'OVMF_CODE_4M.secboot.fd'] : ['OVMF_CODE_4M.fd', 'OVMF_CODE.fd']);
  const template = find(secureBoot ? ['OVMF_VARS_4M.ms.fd'] : ['OVMF_VARS_4M.fd', 'OVMF_VARS.fd']);
  if (!code || !template) throw badRequest(`No UEFI firmware (OVMF${secureBoot ? ' with secure boot' : ''}) is installed: install the ovmf package, or set security.csm=true for BIOS`);
  const vars = path.join(volumePath, 'qemu.nvram');
  if (!existsSync(vars)) await copyFile(template, vars);
  return { name: secureBoot ? 'OVMF, secure boot' : 'OVMF', code, vars, secureBoot };
}
