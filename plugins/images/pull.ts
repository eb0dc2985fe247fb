/**
 * Pulling an image from another daemon (LXD protocol): the alias resolved there, the image's record
 * read, its export downloaded into a staging area while hashed (unified, or the multipart split
 * form), the hash checked against the fingerprint, then installed as an upload is (install.ts). All
 * of it runs in the operation, which a client may cancel; the staging area goes whatever happens.
 */
import type { IncomingMessage } from 'node:http';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, notFound, RevisionMismatch, type ApiRequest, type Operation, type OperationControl, type PluginContext } from '../../sdk/index.js';
import { byteSize } from '../../sdk/lib/operations/progress.js';
import type { ImageCatalog } from './catalog.js';
import type { ImageFiles } from './files.js';
import { imageUrl, type StoredAlias, type StoredImage } from './image.js';
import { imageLifecycle, type ImageOrigin } from './lifecycle.js';
import { inspectSplit, inspectUnified } from './inspect.js';
import type { ImageInstaller, NewAlias } from './install.js';
import { multipartBoundary } from './multipart.js';
import { RemoteDaemon, RemoteError, type ClientIdentity } from './remote-daemon.js';
import type { RemoteImageSource } from './remote-source.js';
import { apiTime, NEVER_EXPIRES, NEVER_USED } from './times.js';
import { receiveSplit, receiveUnified } from './upload.js';

const FULL_FINGERPRINT = /^[0-9a-f]{64}$/;
/** How often `download_progress` may change: a few times a second at most. */
const PROGRESS_INTERVAL_MS = 250;

/** What the request asks of the copy beside its source. */
export interface PullOptions {
  aliases: NewAlias[];
  public: boolean;
  auto_update: boolean;
  /** A copy made to create an instance (`lxc launch r:image`) rather than asked for. */
  cached: boolean;
  profiles: string[];
  /** Properties set over those the image brings (the request's `properties`). */
  properties?: Record<string, string>;
  /** The request's `filename`, over the one the source gives. */
  filename?: string;
  /** Carried over when a newer image replaces an older one (refresh, auto-update). */
  last_used_at?: string;
  /**
   * A client's request that set any of public, auto_update, filename or properties: as the
   * reference does, those then make the record, the image new or already held (its filename
   * becomes the request's, empty when it gave none).
   */
  requestEdits?: boolean;
}

/** Where the image's files come from and what is known of the image before they arrive. */
export interface ImageDownload {
  remote: RemoteDaemon;
  path: string;
  query: Record<string, string>;
  fingerprint: string;
  /** What the source's record says, when it has one (LXD protocol); a URL source has none. */
  info: Record<string, any>;
  updateSource?: StoredImage['update_source'];
}

export class ImagePuller {
  constructor(
    private readonly ctx: PluginContext,
    private readonly catalog: ImageCatalog,
    private readonly files: ImageFiles,
    private readonly installer: ImageInstaller,
  ) {}

  /** The operation of POST /1.0/images for a remote source. */
  operation(req: ApiRequest, source: RemoteImageSource, options: PullOptions): Operation {
    return this.ctx.operations.create({
      class: 'task',
      description: 'Downloading image',
      request: req,
      mayCancel: true,
      run: (op) => this.pull(req, req.project, source, options, op),
    });
  }

  /**
   * Fetch and install; answers `{fingerprint, size}`. An image the project holds already is not
   * fetched again (see reuse()), as the reference does.
   */
  async pull(req: ImageOrigin, project: string, source: RemoteImageSource, options: PullOptions, op: OperationControl): Promise<{ fingerprint: string; size: string }> {
    const remote = await this.connect(source, op.signal);
    try {
      const info = await this.lookup(remote, source);
      const fp = info.fingerprint as string;
      const local = await this.catalog.images.get(project, fp);
      if (local) return await this.reuse(req, project, fp, options);
      try {
        // As the reference: no update source for an image fetched with a one-time secret (it cannot be fetched again).
        const updateSource = source.secret ? undefined : { alias: source.updateAlias, certificate: source.certificate ?? '', protocol: 'lxd', server: source.server, image_type: source.imageType ?? '' };
        const query: Record<string, string> = source.secret ? { secret: source.secret } : {};
        return await this.download(req, project, { remote, path: `/1.0/images/${fp}/export`, query, fingerprint: fp, info, updateSource }, options, op);
      } catch (err) {
        // Another request (a second launch from the same image) installed it meanwhile: use that one.
        if (!(await this.catalog.images.get(project, fp))) throw err;
        return await this.reuse(req, project, fp, options);
      }
    } catch (err) {
      if (err instanceof RemoteError) throw badRequest(`Failed to fetch the image "${source.name}": ${err.message}`);
      throw err;
    }
  }

  /** A client for the source's server, presenting this daemon's certificate. */
  async connect(source: RemoteImageSource, signal: AbortSignal): Promise<RemoteDaemon> {
    return new RemoteDaemon(source.server, source.certificate, await this.identity(), signal);
  }

  /** This daemon's server certificate: the reference's daemons present theirs to one another. */
  private async identity(): Promise<ClientIdentity | undefined> {
    try {
      const [cert, key] = await Promise.all(['server.crt', 'server.key'].map((f) => readFile(path.join(this.ctx.dataDir, f), 'utf8')));
      return { cert: cert!, key: key! };
    } catch {
      return undefined;
    }
  }

  /** The alias (of the type asked for) when the name is one there, else the name as a fingerprint. */
  async lookup(remote: RemoteDaemon, source: RemoteImageSource): Promise<Record<string, any>> {
    const query: Record<string, string> = source.secret ? { secret: source.secret } : {};
    let fp = source.name;
    if (!FULL_FINGERPRINT.test(fp)) {
      const alias = await remote.json(`/1.0/images/aliases/${encodeURIComponent(fp)}`).catch((err) => {
        if (err instanceof RemoteError && err.status === 404) return undefined;
        throw err;
      });
      if (alias?.target && (!source.imageType || (alias.type ?? 'container') === source.imageType)) fp = String(alias.target);
    }
    const info = await remote.json(`/1.0/images/${encodeURIComponent(fp)}`, query).catch((err) => {
      if (err instanceof RemoteError && err.status === 404) throw notFound(`No image or alias "${source.name}" on ${remote.name}`);
      throw err;
    });
    if (typeof info?.fingerprint !== 'string' || !FULL_FINGERPRINT.test(info.fingerprint)) {
      throw new RemoteError(`${remote.name} answered with an image record that has no fingerprint`);
    }
    if (source.imageType && info.type && info.type !== source.imageType) throw notFound(`The image "${source.name}" on ${remote.name} is a ${info.type}, not a ${source.imageType}`);
    return info;
  }

  /**
   * Fetch the files into a staging area while hashing them, check the hash against the fingerprint,
   * inspect and install them. Shared by LXD-protocol pulls and URL sources.
   */
  async download(req: ImageOrigin, project: string, from: ImageDownload, options: PullOptions, op: OperationControl) {
    const { remote, info, fingerprint: fp } = from;
    await this.installer.checkAliasesFree(project, options.aliases);
    const area = await this.files.stagingArea();
    let res: IncomingMessage | undefined;
    try {
      res = await remote.download(from.path, from.query);
      const total = Number(info.size) > 0 ? Number(info.size) : Number(res.headers['content-length'] ?? 0);
      const observe = counter(remote, total, downloadProgress(op, total));
      const contentType = String(res.headers['content-type'] ?? '');
      const boundary = contentType.toLowerCase().startsWith('multipart/form-data') ? multipartBoundary(contentType) : undefined;
      const upload = await (boundary ? receiveSplit(res, boundary, area, { observe }) : receiveUnified(res, area, String(info.filename ?? ''), { observe }))
        .catch((err) => {
          throw remote.broken(err);
        });
      if (upload.fingerprint !== fp) throw badRequest(`The image from ${remote.name} does not match its fingerprint: got ${upload.fingerprint}, expected ${fp}`);

      // The reference leaves only the result in the finished operation's metadata.
      op.updateMetadata({ download_progress: undefined });
      const tools = this.ctx.hostTools;
      const inspected = upload.rootfsFile
        ? await inspectSplit(tools, upload.metadataFile, upload.rootfsFile, upload.rootfsPart ?? 'rootfs')
        : await inspectUnified(tools, upload.metadataFile, upload.walked);
      const image: StoredImage = {
        fingerprint: fp,
        filename: options.requestEdits ? options.filename ?? '' : typeof info.filename === 'string' ? info.filename : upload.filename,
        size: upload.size,
        architecture: inspected.metadata.architecture,
        type: inspected.type,
        public: options.public,
        auto_update: options.auto_update,
        cached: options.cached,
        properties: { ...(stringRecord(info.properties) ?? inspected.metadata.properties), ...options.properties },
        profiles: options.profiles,
        created_at: typeof info.created_at === 'string' ? info.created_at : apiTime(new Date(inspected.metadata.creation_date * 1000)),
        uploaded_at: apiTime(new Date()),
        expires_at: typeof info.expires_at === 'string' ? info.expires_at : NEVER_EXPIRES,
        last_used_at: options.last_used_at ?? NEVER_USED,
        files: inspected.files,
        ...(from.updateSource ? { update_source: from.updateSource } : {}),
      };
      return await this.installer.install(req, op, upload, image, options.aliases, 'Image with same fingerprint already exists', project);
    } finally {
      // A download refused halfway (a bad part) is not read to its end.
      res?.destroy();
      await rm(area, { recursive: true, force: true });
    }
  }

  /**
   * An image the project holds already is not fetched again: the aliases asked for are added and,
   * when the request set them, its public, auto_update, filename and properties are changed.
   */
  async reuse(origin: ImageOrigin, project: string, fp: string, options: PullOptions): Promise<{ fingerprint: string; size: string }> {
    await this.addAliases(project, fp, options.aliases);
    for (let attempt = 0; ; attempt++) {
      const found = await this.catalog.images.get(project, fp);
      if (!found) throw notFound('Image not found');
      if (!options.requestEdits) return { fingerprint: fp, size: String(found.doc.size) };
      const next: StoredImage = {
        ...found.doc, public: options.public, auto_update: options.auto_update, filename: options.filename ?? '',
        properties: { ...found.doc.properties, ...options.properties },
      };
      try {
        await this.catalog.images.put(project, fp, next, found.rev);
      } catch (err) {
        // A concurrent edit: read it again and apply the request on top.
        if (attempt < 3 && err instanceof RevisionMismatch) continue;
        throw err;
      }
      imageLifecycle(this.ctx.events, origin, 'image-updated', (named) => imageUrl(named, fp));
      return { fingerprint: fp, size: String(found.doc.size) };
    }
  }

  /** Aliases asked for an image the project already held. */
  async addAliases(project: string, fp: string, aliases: NewAlias[]): Promise<void> {
    if (!aliases.length) return;
    await this.installer.checkAliasesFree(project, aliases);
    await this.catalog.store.transaction(async (tx) => {
      for (const alias of aliases) {
        await tx.collection<StoredAlias>('aliases').put(project, alias.name, { name: alias.name, description: alias.description, target: fp }, 0);
      }
    });
  }
}

const stringRecord = (value: unknown): Record<string, string> | undefined => {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  return Object.fromEntries(Object.entries(value).filter(([, v]) => typeof v === 'string')) as Record<string, string>;
};

/** Multipart headers and boundaries around a split image's two files: far less than this. */
const MULTIPART_SLACK = 64 * 1024;

/**
 * The bytes of a download counted as they pass; a peer sending more than the image's size (plus
 * multipart framing) is cut off.
 */
function counter(remote: RemoteDaemon, total: number, onBytes: (done: number) => void): (chunk: Buffer) => void {
  let done = 0;
  return (chunk) => {
    done += chunk.length;
    if (total > 0 && done > total + MULTIPART_SLACK) throw new RemoteError(`${remote.name} sent more than the ${total} bytes the image has`);
    onBytes(done);
  };
}

/** `download_progress` as the reference shows it (`42% (7.53MB/s)`), which lxc prints after "Retrieving image: ". */
function downloadProgress(op: OperationControl, total: number): (done: number) => void {
  const started = Date.now();
  let last = -Infinity;
  let shown = -1;
  return (done) => {
    const now = Date.now();
    const percent = total > 0 ? Math.min(100, Math.floor((done * 100) / total)) : 0;
    if (percent === shown || (now - last < PROGRESS_INTERVAL_MS && percent < 100)) return;
    last = now;
    shown = percent;
    const speed = Math.round(done / (Math.max(1, now - started) / 1000));
    op.updateMetadata({ download_progress: total > 0 ? `${percent}% (${byteSize(speed)}/s)` : `${byteSize(done)} (${byteSize(speed)}/s)` });
  };
}
