/**
 * host-hardware-devices: the `usb`, `gpu`, `pci` and `infiniband` device types, registered with
 * the instances family. They validate as the reference does and look for the hardware at start;
 * passing present hardware through is not implemented, and such a start is refused (see
 * docs/decisions/0069-host-hardware-devices.md).
 */
import { definePlugin, InstancesExtensionPointRef } from '../../sdk/index.js';
import { GpuDevice } from './gpu.js';
import { InfinibandDevice } from './infiniband.js';
import { PciDevice } from './pci.js';
import { UsbDevice } from './usb.js';

export default definePlugin({
  register(ctx) {
    const instances = ctx.extensionPoints.get(InstancesExtensionPointRef);
    if (!instances) throw new Error('the host-hardware-devices plugin needs the "instances" extension point');
    for (const type of [new UsbDevice(), new GpuDevice(), new PciDevice(), new InfinibandDevice()]) instances.registerDeviceType(type);
  },
});
