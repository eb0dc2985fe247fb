/**
 * Edits of instance and image volumes through the volume API. Their content belongs to their
 * instance or image; what the API changes is the record beside it: description and config.
 * Instance volumes take `user.*` and the `snapshots.*` keys (their size is the root disk device's
 * business, `security.*` is for custom volumes); image volumes take a description only, their
 * config being fixed when the image is unpacked, as in the reference.
 */
import { badRequest, type PluginContext, type Requestor, type VolumeRef, type VolumeState } from '../../../sdk/index.js';
import type { VolumeManager } from '../volumes.js';
import { volumeUrl } from './record.js';

const INSTANCE_VOLUME_KEYS = new Set(['snapshots.expiry', 'snapshots.schedule', 'snapshots.pattern']);

const sameConfig = (a: Record<string, string>, b: Record<string, string>) =>
  Object.keys(a).length === Object.keys(b).length && Object.entries(a).every(([k, v]) => b[k] === v);

export function checkInstanceVolumeConfig(ctx: PluginContext, type: VolumeRef['type'], config: Record<string, string>): void {
  for (const key of Object.keys(config)) {
    if (key.startsWith('user.') || INSTANCE_VOLUME_KEYS.has(key)) continue;
    if (key === 'size') throw badRequest(`The size of a ${type} volume comes from its root disk device ("size" of the device), not from the volume's config`);
    throw badRequest(`Invalid config key "${key}" for a ${type} volume (it takes user.* and snapshots.expiry, snapshots.schedule, snapshots.pattern)`);
  }
  ctx.keys.validate('volume', config);
}

/** Replace the description and config of an instance or image volume. */
export async function editInstanceVolume(
  ctx: PluginContext, volumes: VolumeManager, pool: string, vol: VolumeRef, edit: { description: string; config: Record<string, string> },
  requestor?: Requestor,
): Promise<void> {
  const config = { ...edit.config };
  for (const [k, v] of Object.entries(config)) if (v === '') delete config[k];
  const { rev, state } = await volumes.records.get(pool, vol);
  if (vol.type === 'image') {
    if (!sameConfig(config, state.config)) throw badRequest('The config of an image volume cannot be changed (only its description)');
  } else {
    checkInstanceVolumeConfig(ctx, vol.type, config);
  }
  const next: VolumeState = { ...state, description: edit.description, config };
  await volumes.records.put(pool, vol, next, rev === 0 ? undefined : rev);
  ctx.events.lifecycle('storage-volume-updated', volumeUrl(pool, vol.type, vol.name, vol.project), { project: vol.project, requestor });
}
