/**
 * The device types this build has (the `device-type` extension point), and validation of a
 * `devices` map against them.
 */
import {
  badRequest, DEVICE_TYPE_POINT, TypeRegistry,
  type DeviceConfig, type DeviceType, type DeviceValidationContext, type PluginCatalog,
} from '../../../sdk/index.js';

export class DeviceTypes {
  private readonly types: TypeRegistry<DeviceType>;

  constructor(catalog: PluginCatalog) {
    this.types = new TypeRegistry(DEVICE_TYPE_POINT, 'device type', catalog);
  }

  register(type: DeviceType): void {
    this.types.register(type.type, type);
  }

  /** Device plugins register in their register phase only. */
  seal(): void {
    this.types.seal();
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
        if (this.types.availability(typeName) === 'not-enabled') throw badRequest(`Device "${name}": device type "${typeName}" is not enabled in this build`);
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
