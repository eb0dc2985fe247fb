/** Expanded config and devices: profiles in order, then the instance's own values. */
import type { DeviceConfig, Profile } from '../../sdk/index.js';

export function expandConfig(profiles: Profile[], own: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of profiles) Object.assign(out, p.config);
  return Object.assign(out, own);
}

export function expandDevices(profiles: Profile[], own: Record<string, DeviceConfig>): Record<string, DeviceConfig> {
  const out: Record<string, DeviceConfig> = {};
  for (const p of profiles) Object.assign(out, p.devices);
  return Object.assign(out, own);
}
