/** Checks of the JSON shapes clients send for profiles. */
import { badRequest, type DeviceConfig } from '../../sdk/index.js';

export function bodyObject(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw badRequest('The request body must be a JSON object');
  return body as Record<string, unknown>;
}

export function stringMap(value: unknown, what: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw badRequest(`"${what}" must be a map of strings`);
  const out: Record<string, string> = {};
  for (const [key, v] of Object.entries(value)) {
    if (typeof v === 'string') out[key] = v;
    else if (typeof v === 'number' || typeof v === 'boolean') out[key] = String(v);
    else throw badRequest(`"${what}" value of "${key}" must be a string`);
  }
  return out;
}

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

export function optionalString(value: unknown, what: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw badRequest(`"${what}" must be a string`);
  return value;
}
