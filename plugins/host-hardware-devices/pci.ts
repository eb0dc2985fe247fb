/**
 * The `pci` device type: a host PCI function given to a virtual machine (containers cannot take
 * one). A start fails when the host has no function at `address`, and also when it has one,
 * since this build does not pass PCI functions through (VFIO).
 */
import { badRequest, type DeviceConfig, type DeviceRunConfig, type DeviceStartContext, type DeviceType, type DeviceValidationContext } from '../../sdk/index.js';
import { pciFunctionPresent } from './host-hardware.js';
import { checkKnown, checkValues, notSupported, pciAddress, pciSysfsName, recheck } from './options.js';

export class PciDevice implements DeviceType {
  readonly type = 'pci';

  validate(config: DeviceConfig, ctx: DeviceValidationContext): void {
    if (ctx.instanceType === 'container') throw new Error('pci devices are for virtual machines only');
    checkKnown(config, ['address'], 'a pci device');
    if (!config.address) throw new Error('option "address" is required (a PCI address such as 0000:01:00.0)');
    checkValues(config, { address: pciAddress });
  }

  async start(ctx: DeviceStartContext): Promise<DeviceRunConfig> {
    recheck(this, ctx);
    const address = pciSysfsName(ctx.config.address!);
    if (!pciFunctionPresent(address)) throw badRequest(`Device "${ctx.name}": the host has no PCI device at address ${address}`);
    throw notSupported('PCI', ctx.name, `a PCI device at ${address}`);
  }
}
