/**
 * The `usb` device type: a host USB device picked by vendor and product id. A device that is not
 * `required` (the default) lets the instance start without it; a required one stops the start
 * when the host has no match. Passing a present device through is not done by this build, so a
 * match refuses the start rather than starting without it.
 */
import { badRequest, truthy, type DeviceConfig, type DeviceRunConfig, type DeviceStartContext, type DeviceType, type DeviceValidationContext } from '../../sdk/index.js';
import { usbDevices } from './host-hardware.js';
import { bool, checkKnown, checkValues, deviceId, fileMode, notSupported, refuseOnVm, unixId, recheck } from './options.js';

const OPTIONS = ['vendorid', 'productid', 'uid', 'gid', 'mode', 'required'] as const;

export function describeUsb(config: DeviceConfig): string {
  const ids = [config.vendorid && `vendorid ${config.vendorid}`, config.productid && `productid ${config.productid}`].filter(Boolean);
  return ids.length ? ids.join(', ') : 'any vendor and product';
}

export class UsbDevice implements DeviceType {
  readonly type = 'usb';
  readonly hotplug = true;

  validate(config: DeviceConfig, ctx: DeviceValidationContext): void {
    checkKnown(config, OPTIONS, 'a usb device');
    checkValues(config, { vendorid: deviceId, productid: deviceId, uid: unixId, gid: unixId, mode: fileMode, required: bool });
    refuseOnVm(config, ['uid', 'gid', 'mode'], ctx.instanceType === 'virtual-machine', 'a usb device');
  }

  async start(ctx: DeviceStartContext): Promise<DeviceRunConfig> {
    recheck(this, ctx);
    const c = ctx.config;
    const matches = usbDevices().filter((d) => (!c.vendorid || d.vendorid === c.vendorid) && (!c.productid || d.productid === c.productid));
    if (matches.length) throw notSupported('USB', ctx.name, `${matches.length} matching USB device(s): ${matches.map((m) => m.name).join(', ')}`);
    if (truthy(c.required)) throw badRequest(`Device "${ctx.name}": required USB device not found on the host (${describeUsb(c)})`);
    return {};
  }
}
