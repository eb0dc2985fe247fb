/**
 * Publishing: `POST /1.0/images` with an instance or snapshot as the source. The registered
 * source provider opens the content in the request, so an unknown source is a 404 at once; any
 * other refusal (a running instance) fails the operation instead, as the reference answers. The
 * operation packs the content into a unified tarball in the staging area and installs it as
 * uploads are installed.
 */
import { lstat, mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import {
  async, BLOCK_IMAGE, isApiError, isPlainObject, ProjectsServiceRef, requestedProjectOf, type ApiRequest, type ApiResponse,
  type HostTools, type ImageSourceContent, type ImageSourceProvider, type OperationControl, type PluginContext,
} from '../../sdk/index.js';
import { progressReporter } from '../../sdk/lib/operations/index.js';
import type { ImageFiles } from './files.js';
import type { StoredImage } from './image.js';
import type { ImageInstaller } from './install.js';
import { packImage, type PackSpec } from './pack.js';
import { publishedMetadata } from './publish-metadata.js';
import { parsePublishRequest, type PublishRequest } from './publish-request.js';
import type { ImageSources } from './sources.js';
import { apiTime, NEVER_USED, unixTime } from './times.js';
import { estimateTarSize } from './tree-size.js';

/** The stage name and label the reference's clients show while an instance is packed. */
const STAGE = 'create_image_from_container_pack';
const LABEL = 'Image pack';

/** What goes into the image beside metadata.yaml, in the reference's order. */
const MEMBERS = ['rootfs', 'rootfs.img', 'templates'];

export class ImagePublisher {
  constructor(
    private readonly ctx: PluginContext,
    private readonly files: ImageFiles,
    private readonly installer: ImageInstaller,
    private readonly sources: ImageSources,
  ) {}

  /** The provider for a JSON body's `source.type`, when a plugin registered one. */
  providerFor(body: unknown): ImageSourceProvider | undefined {
    if (!isPlainObject(body) || !isPlainObject(body.source)) return undefined;
    return this.sources.forType(body.source.type);
  }

  async publish(req: ApiRequest, body: Record<string, unknown>, provider: ImageSourceProvider): Promise<ApiResponse> {
    const project = req.project;
    // The instance is in the project the client named, even when its images are those of `default`.
    const named = requestedProjectOf(req);
    // The project's images.compression_algorithm (projects_compression) comes before the server's.
    const projectCompression = (await this.ctx.services.get(ProjectsServiceRef)?.get(named))?.config['images.compression_algorithm'];
    const request = await parsePublishRequest(this.ctx.hostTools, body, projectCompression || this.ctx.serverConfig.get('images.compression_algorithm'));
    await this.installer.checkAliasesFree(project, request.aliases);
    let opened: ImageSourceContent | undefined;
    let refusal: unknown;
    try {
      opened = await provider.open(named, request.source);
    } catch (err) {
      // An unknown source is answered at once; any other refusal fails the operation.
      if (isApiError(err) && err.status === 404) throw err;
      refusal = err;
    }
    let released = false;
    const release = async () => {
      if (released || !opened) return;
      released = true;
      await opened.release();
    };
    const content = opened;
    try {
      return async(this.installer.operation(req, async (op) => {
        if (!content) throw refusal;
        return await this.build(req, op, request, content, release);
      }, release));
    } catch (err) {
      await release();
      throw err;
    }
  }

  private async build(req: ApiRequest, op: OperationControl, request: PublishRequest, content: ImageSourceContent, release: () => Promise<void>) {
    // A relative path would be read from the daemon's working directory.
    if (!path.isAbsolute(content.dir)) throw new Error('The source has no storage volume to publish from');
    const now = new Date();
    const area = await this.files.stagingArea();
    try {
      const meta = await publishedMetadata(content, request, area, now);
      const members = await present(content.dir, MEMBERS);
      const disk = content.type === 'virtual-machine' ? await vmDisk(this.ctx.hostTools, content.dir, area) : undefined;
      if (!members.includes('rootfs') && !members.includes('rootfs.img') && !disk) throw new Error('The source has no root filesystem to publish');
      const progress = progressReporter(op, STAGE, LABEL, await estimateTarSize(content.dir, members) + (disk?.bytes ?? 0));
      const out = path.join(area, 'image');
      const packed = await packImage(this.ctx.hostTools, {
        metadataDir: meta.dir, dir: content.dir, members, extra: disk?.extra, compressor: request.compressor, out, signal: op.signal, onProgress: progress.update,
      });
      // The source is not read any more: let it go (unlock the instance) before installing.
      await release();
      progress.clear();
      const image: StoredImage = {
        fingerprint: packed.fingerprint,
        filename: request.filename,
        size: packed.size,
        architecture: content.architecture,
        type: content.type,
        public: request.public,
        // The reference keeps auto_update off for published images: they have no source to update from.
        auto_update: false,
        properties: meta.properties,
        profiles: ['default'],
        created_at: apiTime(now),
        uploaded_at: apiTime(new Date()),
        // Published images show Go's zero time when they never expire, as the reference does.
        expires_at: meta.expiryDate ? unixTime(meta.expiryDate) : NEVER_USED,
        last_used_at: NEVER_USED,
        files: { metadata: { kind: 'tar', compression: request.compressor.compression } },
      };
      return await this.installer.install(req, op, { metadataFile: out }, image, request.aliases, `The image already exists: ${packed.fingerprint}`);
    } finally {
      await rm(area, { recursive: true, force: true });
    }
  }
}

/**
 * A virtual machine's raw disk (`root.img` in its volume) as the image's `rootfs.img`: a compressed
 * qcow2, as the reference publishes VMs (holes and zeros take no room), made in the staging area.
 */
async function vmDisk(tools: HostTools, dir: string, area: string): Promise<{ extra: PackSpec['extra']; bytes: number } | undefined> {
  const raw = path.join(dir, BLOCK_IMAGE);
  if (!await lstat(raw).then((st) => st.isFile(), () => false)) return undefined;
  const into = path.join(area, 'disk');
  await mkdir(into, { mode: 0o700 });
  const qcow2 = path.join(into, 'rootfs.img');
  await tools.run('qemu-img', ['convert', '-q', '-c', '-f', 'raw', '-O', 'qcow2', raw, qcow2], { timeoutMs: 6 * 3600_000, endWithDaemon: true });
  return { extra: { dir: into, members: ['rootfs.img'] }, bytes: (await stat(qcow2)).size };
}

async function present(dir: string, names: string[]): Promise<string[]> {
  const found = await Promise.all(names.map((name) => lstat(path.join(dir, name)).then(() => true, () => false)));
  return names.filter((_, i) => found[i]);
}
