/**
 * POST /1.0/images/<fingerprint>/export: push the image to another daemon (`images_push_relay`).
 * The client got a one-time `secret` from the target (a push-mode `POST /1.0/images` there); this
 * daemon uploads the image's files to the target with it, as an untrusted client, and waits for the
 * target's import to end: this operation succeeds only once the image is stored there.
 */
import Joi from 'joi';
import type { ApiRequest, EventsService, Operation, OperationsService } from '../../sdk/index.js';
import { exportResponse } from './export.js';
import type { ImageFiles } from './files.js';
import { imageUrl, type StoredImage } from './image.js';
import { imageLifecycle } from './lifecycle.js';
import { remoteDaemon, remoteRequest, type RemoteAnswer } from './push-connection.js';

export const exportPostBody = Joi.object({
  target: Joi.string().required(),
  certificate: Joi.string().allow('').default(''),
  secret: Joi.string().allow('').default(''),
  aliases: Joi.array().items(Joi.object({ name: Joi.string().required(), description: Joi.string().allow('') }).unknown(true)).allow(null),
  project: Joi.string().allow('').default(''),
  profiles: Joi.array().items(Joi.string()).allow(null),
}).unknown(true);

export interface ExportPost {
  target: string;
  certificate: string;
  secret: string;
  project: string;
  profiles?: string[] | null;
}

const failure = (what: string, answer: RemoteAnswer) => new Error(`${what}: ${answer.json?.error || `status ${answer.status}`}`);

export function pushExport(
  deps: { operations: OperationsService; events: EventsService; files: ImageFiles },
  req: ApiRequest, image: StoredImage, body: ExportPost,
): Operation {
  // Checked before the operation starts: a wrong address or certificate is the client's mistake.
  const remote = remoteDaemon(body.target, body.certificate);
  const fp = image.fingerprint;
  const query = body.project ? `?project=${encodeURIComponent(body.project)}` : '';
  return deps.operations.create({
    class: 'task',
    description: 'Downloading image',
    request: req,
    resources: { images: [imageUrl(req.project, fp)] },
    run: async (op) => {
      const upload = exportResponse(image, deps.files);
      const headers: Record<string, string> = {
        'Content-Type': upload.contentType,
        'X-LXD-fingerprint': fp,
        'X-LXD-filename': fp,
        'X-LXD-secret': body.secret,
      };
      if (upload.headers?.['Content-Length']) headers['Content-Length'] = upload.headers['Content-Length'];
      if (body.profiles?.length) headers['X-LXD-profiles'] = new URLSearchParams(body.profiles.map((p): [string, string] => ['profile', p])).toString();
      const started = await remoteRequest(remote, 'POST', `/1.0/images${query}`, upload.body as any, headers, op.signal);
      if (started.json?.type !== 'async') throw failure('The target refused the image', started);
      const id = String(started.json.metadata?.id ?? '');
      const secret = String(started.json.metadata?.metadata?.secret ?? '');
      const waited = await remoteRequest(remote, 'GET', `/1.0/operations/${encodeURIComponent(id)}/wait?timeout=-1&secret=${encodeURIComponent(secret)}`, undefined, {}, op.signal);
      const status = waited.json?.metadata?.status;
      if (waited.json?.type !== 'sync' || status !== 'Success') {
        throw new Error(`The target failed to import the image: ${waited.json?.metadata?.err || waited.json?.error || status}`);
      }
      imageLifecycle(deps.events, req, 'image-retrieved', (project) => imageUrl(project, fp), { target: body.target });
      return undefined;
    },
  });
}
