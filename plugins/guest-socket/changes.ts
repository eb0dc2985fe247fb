/**
 * What the guest hears about its own instance: `config` events for `user.*` keys and `device`
 * events for devices added, removed or changed, computed by comparing two views of the instance.
 */
import { isDeepStrictEqual } from 'node:util';
import type { DeviceConfig } from '../../sdk/index.js';

export interface GuestView {
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
}

export interface GuestEvent {
  type: 'config' | 'device';
  metadata: Record<string, unknown>;
}

export function guestChanges(before: GuestView, after: GuestView): GuestEvent[] {
  const out: GuestEvent[] = [];
  for (const key of new Set([...Object.keys(before.config), ...Object.keys(after.config)])) {
    if (!key.startsWith('user.')) continue;
    const old = before.config[key] ?? '';
    const value = after.config[key] ?? '';
    if (old !== value) out.push({ type: 'config', metadata: { key, old_value: old, value } });
  }
  for (const name of Object.keys(before.devices)) {
    if (!(name in after.devices)) out.push({ type: 'device', metadata: { action: 'removed', name, config: before.devices[name] } });
  }
  for (const [name, config] of Object.entries(after.devices)) {
    const old = before.devices[name];
    if (!old) out.push({ type: 'device', metadata: { action: 'added', name, config } });
    else if (!isDeepStrictEqual(old, config)) out.push({ type: 'device', metadata: { action: 'updated', name, config } });
  }
  return out;
}
