/** Server configuration keys of the images plugin. */
import { isBool, oneOf, ProjectsServiceRef, truthy, type ConfigKeyDescriptor, type PluginContext } from '../../sdk/index.js';

export const IMAGE_KEYS: ConfigKeyDescriptor[] = [
  {
    key: 'images.compression_algorithm',
    scope: 'server',
    type: 'string',
    default: 'gzip',
    live: true,
    validate: oneOf('bzip2', 'gzip', 'lz4', 'lzma', 'xz', 'zstd', 'squashfs', 'none'),
    extension: 'image_compression_algorithm',
    doc: 'Compression of the images this server creates (publish): bzip2, gzip, lz4, lzma, xz, zstd, squashfs or none',
  },
  {
    key: 'images.auto_update_cached',
    scope: 'server',
    type: 'bool',
    default: 'true',
    live: true,
    validate: isBool,
    doc: 'Whether images downloaded to create an instance (cached images) are kept up to date',
  },
];

/** `images.auto_update_cached` of the project, else of the server (the reference's default: true). */
export async function autoUpdateCached(ctx: PluginContext, project: string): Promise<boolean> {
  const own = (await ctx.services.get(ProjectsServiceRef)?.get(project))?.config?.['images.auto_update_cached'];
  return truthy(own ?? ctx.serverConfig.get('images.auto_update_cached'));
}
