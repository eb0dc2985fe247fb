/** A change to a custom volume run as a background operation that names the volume as its resource. */
import { async, type ApiRequest, type ApiResponse, type PluginContext } from '../../../sdk/index.js';
import { volumeUrl } from './record.js';

export function volumeTask(
  ctx: PluginContext, req: ApiRequest, volume: { pool: string; project: string; name: string },
  description: string, run: () => Promise<unknown>,
): ApiResponse {
  return async(ctx.operations.create({
    class: 'task',
    description,
    request: req,
    resources: { storage_volumes: [volumeUrl(volume.pool, 'custom', volume.name, volume.project)] },
    run: async () => {
      await run();
    },
  }));
}
