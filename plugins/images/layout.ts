/**
 * The shape an image tarball must have, read from its member list before anything is unpacked:
 * `metadata.yaml` once and a regular file, `rootfs` a directory (or `rootfs.img` a regular file),
 * `templates` a directory, and each template metadata.yaml names a regular file in it when it is
 * there at all (a missing one fails when it is applied, as in the reference).
 * A link in any of these places would be followed later: unpacking a split image's rootfs through
 * a `rootfs` symlink writes outside the image, and an instance on a linked rootfs runs on
 * whatever the link names.
 */
import path from 'node:path';
import { badRequest, type ImageMetadata } from '../../sdk/index.js';
import { type TarEntry } from '../../sdk/lib/archive/index.js';

const REGULAR = new Set(['0', '7']);
export const isRegularFile = (entry: TarEntry): boolean => REGULAR.has(entry.type);
const DIRECTORY = '5';

const KIND: Record<string, string> = {
  '1': 'a hard link', '2': 'a symbolic link', '3': 'a character device', '4': 'a block device', '5': 'a directory', '6': 'a FIFO',
};
const kindOf = (type: string) => (REGULAR.has(type) ? 'a regular file' : KIND[type] ?? `a member of type "${type}"`);

/** A member name as tar extracts it: no leading `./` or `/`, no trailing `/`, no doubled slashes. */
export function memberPath(name: string): string {
  return path.posix.normalize(name).replace(/^(\.\/|\/)+/, '').replace(/\/+$/, '');
}

export class ImageLayout {
  private metadataMembers = 0;
  private rootfsDir = false;
  private rootfsImg = false;
  /** Members directly in templates/: name -> tar type. */
  private readonly templateMembers = new Map<string, string>();
  private readonly problems: string[] = [];

  constructor(private readonly what: string) {}

  /** Note one member; returns its path as tar would extract it. */
  see(entry: TarEntry): string {
    const name = memberPath(entry.name);
    const type = entry.type;
    const first = name.split('/', 1)[0]!;
    if (name === 'metadata.yaml') {
      this.metadataMembers++;
      if (!REGULAR.has(type)) this.problem(`metadata.yaml must be a regular file, not ${kindOf(type)}`);
    } else if (name === 'rootfs') {
      if (type !== DIRECTORY) this.problem(`"rootfs" must be a directory, not ${kindOf(type)}`);
      else this.rootfsDir = true;
    } else if (name === 'rootfs.img') {
      if (!REGULAR.has(type)) this.problem(`"rootfs.img" must be a regular file, not ${kindOf(type)}`);
      else this.rootfsImg = true;
    } else if (name === 'templates') {
      if (type !== DIRECTORY) this.problem(`"templates" must be a directory, not ${kindOf(type)}`);
    } else if (first === 'templates' && name.split('/').length === 2) {
      this.templateMembers.set(name.slice('templates/'.length), type);
    } else if (first === 'rootfs') {
      this.rootfsDir = true;
    }
    return name;
  }

  private problem(why: string): void {
    if (this.problems.length < 5) this.problems.push(why);
  }

  /** What the member list says about the image's type; refuses a tarball with the wrong shape. */
  check(metadata: ImageMetadata | undefined): { container: boolean; virtualMachine: boolean } {
    if (this.metadataMembers > 1) this.problem('metadata.yaml appears more than once');
    if (this.problems.length) throw badRequest(`Invalid ${this.what}: ${this.problems.join('; ')}`);
    for (const [target, spec] of Object.entries(metadata?.templates ?? {})) {
      const type = this.templateMembers.get(spec.template);
      if (type !== undefined && !REGULAR.has(type)) {
        throw badRequest(`Invalid ${this.what}: the template "${spec.template}" for "${target}" must be a regular file, not ${kindOf(type)}`);
      }
    }
    return { container: this.rootfsDir, virtualMachine: this.rootfsImg };
  }
}
