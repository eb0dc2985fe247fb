/**
 * `source` of POST /1.0/images naming an image on another daemon (`type: image`, `mode: pull`,
 * `protocol: lxd`): checked before any operation starts, so a client mistake is a 400.
 */
import { X509Certificate } from 'node:crypto';
import { badRequest } from '../../sdk/index.js';

export interface RemoteImageSource {
  server: string;
  certificate?: string;
  secret?: string;
  /** The image's fingerprint or a prefix of it, or an alias to resolve on the server. */
  name: string;
  /** What a later update asks the server for: the alias when one was given (it may move), else the fingerprint. */
  updateAlias: string;
  /** `container` or `virtual-machine` when an alias is to resolve to that type only. */
  imageType?: string;
}

const text = (value: unknown, field: string): string => {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw badRequest(`"source.${field}" must be a string`);
  return value;
};

/** Whether a JSON `source` asks to pull an image from another server. */
export const isRemoteImageSource = (source: Record<string, unknown>): boolean =>
  source.type === 'image' && (source.mode === undefined || source.mode === '' || source.mode === 'pull') && !!source.server;

export function parseRemoteImageSource(source: Record<string, unknown>): RemoteImageSource {
  const protocol = text(source.protocol, 'protocol') || 'lxd';
  if (protocol === 'simplestreams') throw badRequest('Images from simplestreams servers are not fetched by this daemon yet; use a server speaking the LXD protocol');
  if (protocol !== 'lxd') throw badRequest(`Unknown image server protocol "${protocol}"`);

  const server = text(source.server, 'server');
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw badRequest(`"source.server" is not a URL: "${server}"`);
  }
  if (url.protocol !== 'https:') throw badRequest(`"source.server" must be an https:// URL, not "${server}"`);

  const certificate = text(source.certificate, 'certificate') || undefined;
  if (certificate) {
    try {
      new X509Certificate(certificate);
    } catch {
      throw badRequest('"source.certificate" is not a PEM certificate');
    }
  }
  const fingerprint = text(source.fingerprint, 'fingerprint');
  const alias = text(source.alias, 'alias');
  const name = fingerprint || alias;
  if (!name) throw badRequest('Pulling an image needs "source.fingerprint" or "source.alias"');
  if (name.includes('/') || name.includes('?') || name.includes('#')) throw badRequest(`Invalid image name "${name}"`);
  const imageType = text(source.image_type, 'image_type') || undefined;
  if (imageType && imageType !== 'container' && imageType !== 'virtual-machine') throw badRequest(`Unknown image type "${imageType}"`);
  return { server: url.href.replace(/\/$/, ''), certificate, secret: text(source.secret, 'secret') || undefined, name, updateAlias: alias || fingerprint, imageType };
}
