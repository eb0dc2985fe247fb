/**
 * The `infiniband` device type (its own type, not a NIC type, as in the reference): an InfiniBand
 * interface of the host (`nictype` physical) or a virtual function of it (`nictype` sriov), named
 * by `parent`. A start fails when the host has no InfiniBand interface of that name, and also
 * when it has one, since this build does not move InfiniBand interfaces into instances.
 */
import { badRequest, type DeviceConfig, type DeviceRunConfig, type DeviceStartContext, type DeviceType, type DeviceValidationContext } from '../../sdk/index.js';
import { infinibandInterfacePresent } from './host-hardware.js';
import { checkKnown, checkValues, notSupported, recheck } from './options.js';

const OPTIONS = ['nictype', 'parent', 'name', 'hwaddr', 'mtu'] as const;
const NICTYPES = ['physical', 'sriov'];

/** An InfiniBand hardware address: 8 bytes (a GUID) or the 20-byte link address, hex pairs separated by colons. */
const hwaddr = (v: string) => {
  const bytes = v.split(':');
  if ((bytes.length !== 8 && bytes.length !== 20) || !bytes.every((b) => /^[0-9a-fA-F]{2}$/.test(b))) {
    throw new Error(`"${v}" is not an InfiniBand address (8 or 20 bytes in hex, separated by colons)`);
  }
};

const mtu = (v: string) => {
  if (!/^\d+$/.test(v)) throw new Error(`"${v}" is not a number`);
  if (Number(v) < 1280 || Number(v) > 16384) throw new Error(`${v} is outside the InfiniBand MTU range (1280 to 16384)`);
};

/** An interface name inside the instance: what the kernel accepts (at most 15 characters, no '/', ':' or blanks). */
const ifName = (v: string) => {
  if (v.length > 15) throw new Error(`"${v}" is longer than 15 characters`);
  if (v === '.' || v === '..' || /[/:\s]/.test(v)) throw new Error(`"${v}" is not a valid network interface name`);
};

export class InfinibandDevice implements DeviceType {
  readonly type = 'infiniband';

  validate(config: DeviceConfig, _ctx: DeviceValidationContext): void {
    if (!config.nictype) throw new Error('option "nictype" is required (physical or sriov)');
    if (!NICTYPES.includes(config.nictype)) throw new Error(`option "nictype": "${config.nictype}" is not one of physical, sriov`);
    checkKnown(config, OPTIONS, 'an infiniband device');
    if (!config.parent) throw new Error('option "parent" is required (the host\'s InfiniBand interface)');
    checkValues(config, { hwaddr, mtu, name: ifName });
  }

  async start(ctx: DeviceStartContext): Promise<DeviceRunConfig> {
    recheck(this, ctx);
    const parent = ctx.config.parent!;
    if (!infinibandInterfacePresent(parent)) throw badRequest(`Device "${ctx.name}": the host has no InfiniBand interface "${parent}" (nictype ${ctx.config.nictype})`);
    throw notSupported(`InfiniBand (nictype ${ctx.config.nictype})`, ctx.name, `the InfiniBand interface "${parent}"`);
  }
}
