/** Checks of the JSON shapes clients send for instances (config maps, device maps, profile lists). */
import { badRequest, stringMap, type DeviceConfig } from '../../sdk/index.js';

export { optionalBool, optionalString, stringMap } from '../../sdk/index.js';

export function deviceMap(value: unknown): Record<string, DeviceConfig> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw badRequest('"devices" must be a map of devices');
  const out: Record<string, DeviceConfig> = {};
  for (const [name, dev] of Object.entries(value)) out[name] = stringMap(dev, `devices.${name}`);
  return out;
}

export function profileList(value: unknown): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.some((p) => typeof p !== 'string')) throw badRequest('"profiles" must be a list of profile names');
  if (new Set(value).size !== value.length) throw badRequest('"profiles" lists a profile twice');
  return value as string[];
}
