/** Server configuration keys of the images plugin. */
import { oneOf, type ConfigKeyDescriptor } from '../../sdk/index.js';

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
];
