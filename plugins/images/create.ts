/**
 * POST /1.0/images. An upload is received into a staging area and checked in the request
 * (a bad tarball is a 400 and leaves nothing behind); the operation then installs the files and
 * writes the record and aliases in one transaction, undoing the files if that fails (install.ts).
 * JSON bodies describe other sources (json-request.ts, publish.ts).
 */
import { rm } from 'node:fs/promises';
import {
  async, badRequest, forbidden, isApiError, randomHex, requestedProjectOf, truthy,
  type ApiRequest, type ApiResponse, type Operation, type PluginContext,
} from '../../sdk/index.js';
import { checkShape } from '../../sdk/index.js';
import { bodyChunks, drain, interrupted } from '../../sdk/lib/http-body/index.js';
import type { ImageFiles } from './files.js';
import type { StoredImage } from './image.js';
import { inspectSplit, inspectUnified } from './inspect.js';
import type { ImageInstaller } from './install.js';
import { imageCreateBody, parseAliases, pushGrantFrom, readJson, stagedJson } from './json-request.js';
import type { ImagePuller, PullOptions } from './pull.js';
import { parseUrlSource, type UrlImageFetcher } from './url-source.js';
import { isRemoteImageSource, parseRemoteImageSource } from './remote-source.js';
import { multipartBoundary } from './multipart.js';
import { imageProfiles } from './profiles.js';
import { header, queryHeader, stringMap } from './names.js';
import type { ImagePublisher } from './publish.js';
import type { PushGrant, PushTokens } from './push-tokens.js';
import { apiTime, NEVER_EXPIRES, NEVER_USED, unixTime } from './times.js';
import { receiveSplit, receiveUnified, type StagedUpload } from './upload.js';

export class ImageCreator {
  constructor(
    private readonly ctx: PluginContext,
    private readonly files: ImageFiles,
    private readonly tokens: PushTokens,
    private readonly installer: ImageInstaller,
    private readonly publisher: ImagePublisher,
    private readonly puller: ImagePuller,
    private readonly urls: UrlImageFetcher,
  ) {}

  async post(req: ApiRequest): Promise<ApiResponse> {
    const body = req.rawBody;
    if (!body) throw badRequest('The request has no body');
    try {
      this.checkCaller(req);
      return await this.receive(req, body);
    } catch (err) {
      await drain(body);
      if (!isApiError(err) && interrupted(body)) throw badRequest('The image upload was interrupted');
      throw err;
    }
  }

  /**
   * Anyone may reach this route, as in the reference: a daemon pushing an image (images_push_relay)
   * is an untrusted client holding the one-time secret this daemon handed out. Without a pending
   * secret an untrusted caller is refused before its body is read; a restricted client stays in its projects.
   */
  private checkCaller(req: ApiRequest): void {
    if (req.trusted) {
      if (req.restrictedTo && !req.restrictedTo.includes(requestedProjectOf(req))) throw forbidden(`Not authorized for project "${requestedProjectOf(req)}"`);
      return;
    }
    const secret = header(req.headers['x-lxd-secret']);
    if (!secret || !this.tokens.pending(secret, req.project)) throw forbidden('Untrusted clients may only upload an image with the secret of a pending push');
  }

  private async receive(req: ApiRequest, body: NodeJS.ReadableStream): Promise<ApiResponse> {
    const contentType = header(req.headers['content-type']);
    const mediaType = contentType.split(';')[0]!.trim().toLowerCase();
    const chunks = bodyChunks(body);
    if (mediaType === 'application/json') {
      if (!req.trusted) throw forbidden('Untrusted clients may only upload an image');
      return this.fromJson(req, await readJson(chunks));
    }

    const area = await this.files.stagingArea();
    let handedOver = false;
    try {
      let upload: StagedUpload;
      if (mediaType === 'multipart/form-data') {
        const boundary = multipartBoundary(contentType);
        if (!boundary) throw badRequest('Invalid multipart image: the Content-Type has no boundary');
        upload = await receiveSplit(chunks, boundary, area);
      } else {
        upload = await receiveUnified(chunks, area, header(req.headers['x-lxd-filename']));
        // Clients that send JSON with no or another Content-Type (curl -d) land here.
        if (mediaType !== 'application/octet-stream' && req.trusted) {
          const json = await stagedJson(upload);
          if (json !== undefined) return await this.fromJson(req, json);
        }
      }
      const op = await this.fromUpload(req, upload, area);
      handedOver = true;
      return async(op);
    } finally {
      if (!handedOver) await rm(area, { recursive: true, force: true });
    }
  }

  /** Check everything the client sent, then start the operation that stores it. */
  private async fromUpload(req: ApiRequest, upload: StagedUpload, area: string): Promise<Operation> {
    const project = req.project;
    const expected = header(req.headers['x-lxd-fingerprint']);
    if (expected && expected !== upload.fingerprint) {
      throw badRequest(`Fingerprints don't match, got ${upload.fingerprint} expected ${expected}`);
    }
    let grant: PushGrant | undefined;
    const secret = header(req.headers['x-lxd-secret']);
    if (secret) {
      grant = this.tokens.take(secret, project);
      if (!grant) throw badRequest('No pending image push matches this secret');
      if (grant.fingerprint !== upload.fingerprint) {
        throw badRequest(`Fingerprints don't match, got ${upload.fingerprint} expected ${grant.fingerprint}`);
      }
    }

    const tools = this.ctx.hostTools;
    const inspected = upload.rootfsFile
      ? await inspectSplit(tools, upload.metadataFile, upload.rootfsFile, upload.rootfsPart ?? 'rootfs')
      : await inspectUnified(tools, upload.metadataFile, upload.walked);

    const properties = { ...(grant?.properties ?? inspected.metadata.properties) };
    for (const params of queryHeader(req.headers['x-lxd-properties'])) {
      for (const [key, value] of params) properties[key] = value;
    }
    const profileNames = queryHeader(req.headers['x-lxd-profiles']).flatMap((p) => p.getAll('profile'));
    const profiles = await imageProfiles(this.ctx.services, project, profileNames.length ? profileNames : undefined);

    const now = new Date();
    const image: StoredImage = {
      fingerprint: upload.fingerprint,
      filename: upload.filename,
      size: upload.size,
      architecture: inspected.metadata.architecture,
      type: inspected.type,
      public: grant ? grant.public : truthy(header(req.headers['x-lxd-public'])),
      auto_update: grant?.auto_update ?? false,
      properties,
      profiles,
      created_at: unixTime(inspected.metadata.creation_date),
      uploaded_at: apiTime(now),
      expires_at: grant?.expires_at ?? (inspected.metadata.expiry_date ? unixTime(inspected.metadata.expiry_date) : NEVER_EXPIRES),
      last_used_at: NEVER_USED,
      files: inspected.files,
    };
    const aliases = grant?.aliases ?? [];
    await this.installer.checkAliasesFree(project, aliases);

    return this.installer.operation(
      req,
      (op) => this.installer.install(req, op, upload, image, aliases, 'Image with same fingerprint already exists'),
      () => rm(area, { recursive: true, force: true }),
      // The pushing daemon waits for the import with this (GET /1.0/operations/<id>/wait?secret=).
      req.trusted ? undefined : { secret: randomHex(32) },
    );
  }

  /**
   * An instance or snapshot to publish (publish.ts), or a push-mode description: a token
   * operation whose secret the upload then presents.
   */
  private async fromJson(req: ApiRequest, json: unknown): Promise<ApiResponse> {
    const body = checkShape(imageCreateBody, json, 'request body');
    const source = (body.source ?? {}) as Record<string, unknown>;
    if (isRemoteImageSource(source)) return this.fromRemote(req, body as Record<string, unknown>, source);
    if (source.type === 'url') return this.fromUrl(req, body as Record<string, unknown>, source);
    const provider = this.publisher.providerFor(body);
    if (provider) return this.publisher.publish(req, body as Record<string, unknown>, provider);
    const grant = pushGrantFrom(req.project, body);
    await this.installer.checkAliasesFree(req.project, grant.aliases);
    return async(this.tokens.create(req, grant));
  }

  /** An image on another server: everything the request says is checked here, the fetch runs in the operation. */
  private async fromRemote(req: ApiRequest, body: Record<string, unknown>, source: Record<string, unknown>): Promise<ApiResponse> {
    const remote = parseRemoteImageSource(source);
    return async(this.puller.operation(req, remote, await this.fetchOptions(req, body)));
  }

  /** An image a URL names (`lxc image import https://…`): checked here, fetched in the operation. */
  private async fromUrl(req: ApiRequest, body: Record<string, unknown>, source: Record<string, unknown>): Promise<ApiResponse> {
    const url = parseUrlSource(source);
    return async(this.urls.operation(req, url, await this.fetchOptions(req, body)));
  }

  /** What a fetched image gets from the request beside its source. */
  private async fetchOptions(req: ApiRequest, body: Record<string, unknown>): Promise<PullOptions> {
    const aliases = parseAliases(body.aliases);
    await this.installer.checkAliasesFree(req.project, aliases);
    const profiles = await imageProfiles(this.ctx.services, req.project, body.profiles as string[] | undefined);
    const properties = body.properties ? stringMap(body.properties, 'properties') : undefined;
    const filename = typeof body.filename === 'string' && body.filename ? body.filename : undefined;
    const edited = properties && Object.keys(properties).length ? properties : undefined;
    return {
      aliases, profiles, public: body.public === true, auto_update: body.auto_update === true, cached: false,
      ...(edited ? { properties: edited } : {}),
      ...(filename ? { filename } : {}),
      requestEdits: body.public === true || body.auto_update === true || !!filename || !!edited,
    };
  }
}
