/**
 * Image source providers registered by other plugins (instances, snapshots), found by the
 * request's `source.type`. `container` and `virtual-machine` are older names of `instance`.
 */
import type { ImageSourceProvider } from '../../sdk/index.js';

const INSTANCE_ALIASES = new Set(['container', 'virtual-machine']);

export class ImageSources {
  private readonly providers = new Map<string, ImageSourceProvider>();

  register(provider: ImageSourceProvider): void {
    if (this.providers.has(provider.type)) throw new Error(`an image source "${provider.type}" is registered twice`);
    this.providers.set(provider.type, provider);
  }

  /** The provider answering a `source.type`, or undefined (uploads, push mode, unknown types). */
  forType(type: unknown): ImageSourceProvider | undefined {
    if (typeof type !== 'string' || type === '') return undefined;
    return this.providers.get(INSTANCE_ALIASES.has(type) ? 'instance' : type);
  }
}
