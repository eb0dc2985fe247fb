/** Checks of the JSON shapes clients send for instances (config maps, device maps, profile lists). */
import { badRequest, type DeviceConfig } from '../../sdk/index.js';

export function stringMap(value: unknown, what: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw badRequest(`"${what}" must be a map of strings`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v === 'string') out[k] = v;
    else if (typeof v === 'number' || typeof v === 'boolean') out[k] = String(v);
    else throw badRequest(`"${what}" value of "${k}" must be a string`);
  }
  return out;
}

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

export function optionalBool(value: unknown, what: string): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw badRequest(`"${what}" must be true or false`);
  return value;
}

export function optionalString(value: unknown, what: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw badRequest(`"${what}" must be a string`);
  return value;
}
