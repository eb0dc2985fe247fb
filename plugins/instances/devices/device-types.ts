/** The device types this build knows, and validation of a `devices` map against them. */
import { badRequest, type DeviceConfig, type DeviceType, type DeviceValidationContext } from '../../../sdk/index.js';

/** Device types of the API; those not registered by an enabled plugin are refused as "not enabled". */
const API_DEVICE_TYPES = ['none', 'nic', 'disk', 'unix-char', 'unix-block', 'unix-hotplug', 'usb', 'gpu', 'infiniband', 'proxy', 'tpm', 'pci'];

export class DeviceTypes {
  private readonly types = new Map<string, DeviceType>();

  register(type: DeviceType): void {
    if (this.types.has(type.type)) throw new Error(`device type "${type.type}" is registered twice`);
    this.types.set(type.type, type);
  }

  get(type: string): DeviceType | undefined {
    return this.types.get(type);
  }

  /** Throws a 400 naming the device at fault. */
  validate(devices: Record<string, DeviceConfig>, ctx: Omit<DeviceValidationContext, 'name'>): void {
    for (const [name, config] of Object.entries(devices)) {
      if (!/^[A-Za-z0-9._-]+$/.test(name) || name.length > 64) throw badRequest(`Invalid device name "${name}"`);
      if (config === null || typeof config !== 'object' || Array.isArray(config)) throw badRequest(`Device "${name}" must be a map of options`);
      for (const [k, v] of Object.entries(config)) {
        if (typeof v !== 'string') throw badRequest(`Device "${name}" option "${k}" must be a string`);
      }
      const typeName = config.type;
      if (!typeName) throw badRequest(`Device "${name}" has no type`);
      const type = this.types.get(typeName);
      if (!type) {
        if (API_DEVICE_TYPES.includes(typeName)) throw badRequest(`Device "${name}": device type "${typeName}" is not enabled in this build`);
        throw badRequest(`Device "${name}": unknown device type "${typeName}"`);
      }
      try {
        type.validate(config, { ...ctx, name });
      } catch (err) {
        throw badRequest(`Invalid device "${name}": ${(err as Error).message}`);
      }
    }
  }
}

/** The asynchronous checks of device types (after `validate`), for an instance's devices. */
export async function checkDevices(types: DeviceTypes, devices: Record<string, DeviceConfig>, ctx: Omit<DeviceValidationContext, 'name'>): Promise<void> {
  for (const [name, config] of Object.entries(devices)) {
    const type = types.get(config.type);
    if (!type?.check) continue;
    try {
      await type.check(config, { ...ctx, name });
    } catch (err) {
      throw badRequest(`Invalid device "${name}": ${(err as Error).message}`);
    }
  }
}

/** Checks shared by device types: every option must be one the type knows. */
export function checkOptions(config: DeviceConfig, known: string[]): void {
  for (const key of Object.keys(config)) {
    if (key !== 'type' && !known.includes(key) && !key.startsWith('user.')) throw new Error(`unknown option "${key}"`);
  }
}
