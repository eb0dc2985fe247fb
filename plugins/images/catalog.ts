/** Image and alias records in the state store, keyed by project and fingerprint or alias name. */
import { badRequest, notFound, type Collection, type StoredDoc, type Store } from '../../sdk/index.js';
import type { StoredAlias, StoredImage } from './image.js';

const HEX = /^[0-9a-f]+$/;

export class ImageCatalog {
  readonly images: Collection<StoredImage>;
  readonly aliases: Collection<StoredAlias>;

  constructor(readonly store: Store) {
    this.images = store.collection<StoredImage>('images');
    this.aliases = store.collection<StoredAlias>('aliases');
  }

  /** By full fingerprint or a prefix matching exactly one image of the project. */
  async find(project: string, fingerprint: string): Promise<StoredDoc<StoredImage>> {
    const wanted = fingerprint.toLowerCase();
    if (!HEX.test(wanted)) throw notFound('Image not found');
    const exact = await this.images.get(project, wanted);
    if (exact) return exact;
    const matches = await this.images.list(project, wanted);
    if (matches.length === 0) throw notFound('Image not found');
    if (matches.length > 1) throw badRequest(`Fingerprint prefix "${fingerprint}" matches more than one image`);
    return matches[0]!;
  }

  async alias(project: string, name: string): Promise<StoredDoc<StoredAlias>> {
    const found = await this.aliases.get(project, name);
    if (!found) throw notFound('Image alias not found');
    return found;
  }

  /** Aliases of a project grouped by target fingerprint. */
  async aliasesByTarget(project: string): Promise<Map<string, StoredAlias[]>> {
    const out = new Map<string, StoredAlias[]>();
    for (const { doc } of await this.aliases.list(project)) {
      const list = out.get(doc.target);
      if (list) list.push(doc);
      else out.set(doc.target, [doc]);
    }
    return out;
  }

  async aliasesOf(project: string, fingerprint: string): Promise<StoredAlias[]> {
    return (await this.aliasesByTarget(project)).get(fingerprint) ?? [];
  }

  /** Whether any project still holds a record of this fingerprint (files are shared). */
  async fingerprintInUse(fingerprint: string): Promise<boolean> {
    return (await this.images.list()).some((r) => r.name === fingerprint);
  }
}
