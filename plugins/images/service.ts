/** ImagesService: what the instances family asks of images (resolve, unpack, last use) and offers them (image sources, files). */
import { lstat } from 'node:fs/promises';
import {
  createUsedByRegistry, notFound, RevisionMismatch,
  type HostTools, type ImageFileKind, type ImageRecord, type ImagesService, type StoredImageFiles,
} from '../../sdk/index.js';
import { formatExtension, type FileFormat } from '../../sdk/lib/archive/index.js';
import type { ImageCatalog } from './catalog.js';
import type { ImageFiles } from './files.js';
import { imageView } from './image.js';
import type { ImagePuller } from './pull.js';
import { isRemoteImageSource, parseRemoteImageSource } from './remote-source.js';
import type { ImageSources } from './sources.js';
import { apiTime } from './times.js';
import { unpackImage } from './unpack.js';
import type { ClusterImageFiles } from './cluster-files.js';

/** `imageProject` maps a project to the one holding its images (`features.images`). */
export function createImagesService(
  catalog: ImageCatalog, files: ImageFiles, tools: HostTools, sources: ImageSources, imageProject: (project: string) => Promise<string>,
  puller: ImagePuller, autoUpdateCached: (project: string) => Promise<boolean>, clusterFiles: ClusterImageFiles,
): ImagesService {
  return {
    usedBy: createUsedByRegistry(),

    registerSource: (provider) => sources.register(provider),

    isRemote: isRemoteImageSource,

    checkRemote: (source) => void parseRemoteImageSource(source),

    async pullCached(req, source, op) {
      const remote = parseRemoteImageSource(source);
      const project = await imageProject(req.project);
      const { fingerprint } = await puller.pull(req, project, remote, {
        aliases: [], public: false, cached: true, auto_update: await autoUpdateCached(project), profiles: ['default'],
      }, op);
      const { doc } = await catalog.find(project, fingerprint);
      return imageView(doc, await catalog.aliasesOf(project, fingerprint));
    },

    async resolve(asked, source): Promise<ImageRecord> {
      const project = await imageProject(asked);
      let fingerprint = source.fingerprint;
      if (source.alias) {
        const alias = await catalog.aliases.get(project, source.alias);
        if (!alias) throw notFound(`Image alias "${source.alias}" not found`);
        fingerprint = alias.doc.target;
      }
      if (!fingerprint) throw notFound('Image not found');
      const { doc } = await catalog.find(project, fingerprint);
      return imageView(doc, await catalog.aliasesOf(project, doc.fingerprint));
    },

    async list(project) {
      const [records, aliases] = await Promise.all([catalog.images.list(project), catalog.aliasesByTarget(project)]);
      return records.map((r) => imageView(r.doc, aliases.get(r.name) ?? []));
    },

    async unpack(fingerprint, dir, onProgress) {
      // Files are per fingerprint: any project's record describes them.
      const record = (await catalog.images.list()).find((r) => r.name === fingerprint);
      if (!record) throw notFound('Image not found');
      await clusterFiles.ensureLocal(record.doc);
      await unpackImage(tools, files, record.doc, dir, onProgress);
    },

    async files(fingerprint) {
      const record = (await catalog.images.list()).find((r) => r.name === fingerprint);
      if (!record) throw notFound('Image not found');
      await clusterFiles.ensureLocal(record.doc);
      const described = record.doc.files;
      const stat = async (file: string) => {
        try {
          return (await lstat(file)).size;
        } catch {
          // Deleted between the record read and now: the image is gone.
          throw notFound('Image not found');
        }
      };
      const metadataPath = files.metadataFile(fingerprint);
      const out: StoredImageFiles = { metadata: { path: metadataPath, size: await stat(metadataPath), kind: fileKind(described.metadata), extension: formatExtension(described.metadata) } };
      if (described.rootfs) {
        const rootfsPath = files.rootfsFile(fingerprint);
        out.rootfs = { path: rootfsPath, size: await stat(rootfsPath), kind: fileKind(described.rootfs), extension: formatExtension(described.rootfs) };
      }
      return out;
    },

    async markUsed(asked, fingerprint) {
      const project = await imageProject(asked);
      // A concurrent edit wins the race; the use is then recorded on top of it.
      for (let attempt = 0; attempt < 3; attempt++) {
        const found = await catalog.images.get(project, fingerprint);
        if (!found) return;
        try {
          await catalog.images.put(project, fingerprint, { ...found.doc, last_used_at: apiTime(new Date()) }, found.rev);
          return;
        } catch (err) {
          if (!(err instanceof RevisionMismatch)) throw err;
        }
      }
    },
  };
}

const fileKind = (format: FileFormat): ImageFileKind => (format.kind === 'tar' ? 'tarball' : format.kind);
