/** Server configuration keys of the images plugin. */
import { isBool, isInt, oneOf, ProjectsServiceRef, truthy, type ConfigKeyDescriptor, type PluginContext } from '../../sdk/index.js';

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
  {
    key: 'images.auto_update_interval',
    scope: 'server',
    type: 'integer',
    default: '6',
    live: true,
    validate: isInt,
    doc: 'Hours between checks for newer versions of images with auto_update (0 or less turns them off)',
  },
  {
    key: 'images.remote_cache_expiry',
    scope: 'server',
    type: 'integer',
    default: '10',
    live: true,
    validate: isInt,
    doc: 'Days after which a cached image nobody used is removed (0 or less keeps them)',
  },
];

/** `images.auto_update_cached` of the project, else of the server (the reference's default: true). */
export async function autoUpdateCached(ctx: PluginContext, project: string): Promise<boolean> {
  const own = (await ctx.services.get(ProjectsServiceRef)?.get(project))?.config?.['images.auto_update_cached'];
  return truthy(own ?? ctx.serverConfig.get('images.auto_update_cached'));
}

/** An integer key of the project, else of the server (project keys override: projects_images_*). */
export async function projectInteger(ctx: PluginContext, project: string, key: string): Promise<number> {
  const own = (await ctx.services.get(ProjectsServiceRef)?.get(project))?.config?.[key];
  const value = Number.parseInt(own || ctx.serverConfig.get(key) || '0', 10);
  return Number.isFinite(value) ? value : 0;
}
