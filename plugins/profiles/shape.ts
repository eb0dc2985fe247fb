/** Checks of the JSON shapes clients send for profiles. */
import { badRequest, stringMap, type DeviceConfig } from '../../sdk/index.js';

/** Every device needs a type; what each type accepts is the instances family's to check. */
export function deviceMap(value: unknown): Record<string, DeviceConfig> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw badRequest('"devices" must be a map of devices');
  const out: Record<string, DeviceConfig> = {};
  for (const [name, dev] of Object.entries(value)) {
    if (name === '' || name.includes('/')) throw badRequest(`Invalid device name "${name}"`);
    const config = stringMap(dev, `devices.${name}`);
    if (!config.type) throw badRequest(`Device validation failed for "${name}": Missing device type`);
    out[name] = config;
  }
  return out;
}
