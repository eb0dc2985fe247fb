/**
 * `source.type: url` of POST /1.0/images (`lxc image import https://…`): the server asks the URL
 * with HEAD, and the answer names the image in two headers, `LXD-Image-Hash` (its sha256) and
 * `LXD-Image-URL` (where its file is); the file is then downloaded and checked against the hash,
 * as the reference does. Plain http:// is taken as the reference takes it (lxc itself only sends https).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { machine } from 'node:os';
import { badRequest, type ApiRequest, type Operation, type OperationControl, type PluginContext } from '../../sdk/index.js';
import type { ImageCatalog } from './catalog.js';
import { canonicalArchitecture } from './architectures.js';
import type { ImageOrigin } from './lifecycle.js';
import type { ImagePuller, PullOptions } from './pull.js';
import { RemoteDaemon, RemoteError } from './remote-daemon.js';

const SHA256 = /^[0-9a-f]{64}$/;
/** Go's client, which the reference uses, stops after 10. */
const MAX_REDIRECTS = 10;

/** The URL of a `url` source, checked before any operation starts. */
export function parseUrlSource(source: Record<string, unknown>): URL {
  const text = source.url;
  if (text === undefined || text === null || text === '') throw badRequest('A "url" image source needs "source.url"');
  if (typeof text !== 'string') throw badRequest('"source.url" must be a string');
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw badRequest(`"source.url" is not a URL: "${text}"`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw badRequest(`"source.url" must be an http:// or https:// URL, not "${text}"`);
  return url;
}

export class UrlImageFetcher {
  constructor(
    private readonly ctx: PluginContext,
    private readonly catalog: ImageCatalog,
    private readonly puller: ImagePuller,
  ) {}

  operation(req: ApiRequest, url: URL, options: PullOptions): Operation {
    return this.ctx.operations.create({
      class: 'task',
      description: 'Downloading image',
      request: req,
      mayCancel: true,
      run: (op) => this.fetch(req, req.project, url, options, op),
    });
  }

  /** The headers of the URL's answer to HEAD, after the redirects it makes (as Go's client follows them). */
  private async resolve(start: URL, signal: AbortSignal): Promise<IncomingHttpHeaders> {
    let url = start;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const { status, headers } = await new RemoteDaemon(url.origin, undefined, undefined, signal).head(`${url.pathname}${url.search}`, {
        'LXD-Server-Architectures': canonicalArchitecture(machine()) ?? machine(),
      });
      if (status < 300) return headers;
      let next: URL | undefined;
      try {
        next = headers.location ? new URL(headers.location, url) : undefined;
      } catch {
        next = undefined;
      }
      if (!next || (next.protocol !== 'http:' && next.protocol !== 'https:')) throw new RemoteError(`${url.origin} answered HEAD with HTTP ${status} and no http(s) location to follow`);
      url = next;
    }
    throw new RemoteError(`${start.origin} redirected more than ${MAX_REDIRECTS} times`);
  }

  async fetch(req: ImageOrigin, project: string, url: URL, options: PullOptions, op: OperationControl): Promise<{ fingerprint: string; size: string }> {
    try {
      const head = await this.resolve(url, op.signal);
      const hash = String(head['lxd-image-hash'] ?? '').trim().toLowerCase();
      const located = String(head['lxd-image-url'] ?? '').trim();
      if (!hash) throw badRequest(`${url.origin} answered without an LXD-Image-Hash header`);
      if (!SHA256.test(hash)) throw badRequest(`The LXD-Image-Hash header of ${url.origin} is not a sha256 fingerprint: "${hash}"`);
      if (!located) throw badRequest(`${url.origin} answered without an LXD-Image-URL header`);
      let file: URL;
      try {
        file = new URL(located, url);
      } catch {
        throw badRequest(`The LXD-Image-URL header of ${url.origin} is not a URL: "${located}"`);
      }
      if (file.protocol !== 'https:' && file.protocol !== 'http:') throw badRequest(`The LXD-Image-URL header of ${url.origin} must name an http:// or https:// URL`);
      if (await this.catalog.images.get(project, hash)) return await this.puller.reuse(req, project, hash, options);
      const remote = new RemoteDaemon(file.origin, undefined, undefined, op.signal);
      // The reference names a URL's image nothing unless the request does.
      const from = { remote, path: `${file.pathname}${file.search}`, query: {}, fingerprint: hash, info: { filename: '' } };
      return await this.puller.download(req, project, from, options, op);
    } catch (err) {
      if (err instanceof RemoteError) throw badRequest(`Failed to fetch the image from ${url.href}: ${err.message}`);
      throw err;
    }
  }
}
