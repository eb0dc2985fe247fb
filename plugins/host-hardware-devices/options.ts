/**
 * Option checks shared by the host hardware device types (usb, gpu, pci, infiniband). Each throws
 * an Error whose message names the option and what it must look like; the instances family wraps
 * it in a 400 naming the device. The syntax follows what the reference daemon accepts at add time.
 */
import { badRequest, isBool, type ApiError, type DeviceConfig, type DeviceStartContext, type DeviceType } from '../../sdk/index.js';

export type OptionCheck = (value: string) => void;

/** Every option must be one the type knows (user.* keys are free-form). */
export function checkKnown(config: DeviceConfig, known: readonly string[], what: string): void {
  for (const key of Object.keys(config)) {
    if (key === 'type' || key.startsWith('user.') || known.includes(key)) continue;
    throw new Error(`option "${key}" is not valid for ${what}`);
  }
}

/** Runs each present, non-empty option through its check, naming the option on failure. */
export function checkValues(config: DeviceConfig, checks: Record<string, OptionCheck>): void {
  for (const [key, check] of Object.entries(checks)) {
    const value = config[key];
    if (value === undefined || value === '') continue;
    try {
      check(value);
    } catch (err) {
      throw new Error(`option "${key}": ${(err as Error).message}`);
    }
  }
}

/** USB and PCI vendor or product ids: four lower-case hexadecimal digits, as sysfs writes them. */
export const deviceId: OptionCheck = (v) => {
  if (!/^[0-9a-f]{4}$/.test(v)) throw new Error(`"${v}" is not four lower-case hexadecimal digits (such as 10de)`);
};

export const unixId: OptionCheck = (v) => {
  if (!/^\d+$/.test(v) || Number(v) > 0xffffffff) throw new Error(`"${v}" is not a user or group id (0 to 4294967295)`);
};

export const fileMode: OptionCheck = (v) => {
  if (!/^[0-7]+$/.test(v) || parseInt(v, 8) > 0o7777) throw new Error(`"${v}" is not an octal file mode (such as 0660)`);
};

export const bool: OptionCheck = (v) => {
  try {
    isBool(v);
  } catch {
    throw new Error(`"${v}" is not a boolean (true or false)`);
  }
};

/** A PCI address, domain optional: 0000:01:00.0 or 01:00.0. */
export const pciAddress: OptionCheck = (v) => {
  if (!/^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]$/.test(v)) throw new Error(`"${v}" is not a PCI address (such as 0000:01:00.0)`);
};

/** The sysfs name of a PCI address: lower case, with the domain. */
export const pciSysfsName = (v: string): string => (v.split(':').length === 2 ? `0000:${v}` : v).toLowerCase();

export function byteRange(v: string, what: string): void {
  if (!/^\d+$/.test(v) || Number(v) > 255) throw new Error(`"${v}" is not a ${what} (0 to 255)`);
}

export const uuid: OptionCheck = (v) => {
  if (!/^(?:MIG-)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/.test(v)) throw new Error(`"${v}" is not a UUID`);
};

/** Options that only mean something inside a container's /dev (a VM gets the hardware itself). */
export function refuseOnVm(config: DeviceConfig, keys: readonly string[], isVm: boolean, what: string): void {
  if (!isVm) return;
  const key = keys.find((k) => config[k] !== undefined && config[k] !== '');
  if (key) throw new Error(`option "${key}" applies to containers only, not to ${what} of a virtual machine`);
}

/** What a present device's start says: this build does not pass host hardware through. */
export function notSupported(kind: string, device: string, found: string): ApiError {
  return badRequest(`Device "${device}": ${kind} passthrough is not supported by this build (the host has ${found})`);
}

/**
 * At start, the checks of add time again with the instance's own type: a record written before
 * these checks existed (or by a build without this plugin) may hold a device its type cannot take.
 */
export function recheck(type: DeviceType, ctx: DeviceStartContext): void {
  try {
    type.validate(ctx.config, { instanceType: ctx.instanceType, name: ctx.name, profile: false, project: ctx.project });
  } catch (err) {
    throw badRequest(`Device "${ctx.name}": ${(err as Error).message}`);
  }
}
