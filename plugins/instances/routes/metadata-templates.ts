/**
 * /1.0/instances/{name}/metadata/templates: list the template files, or with `?path=<file>`
 * read (raw), create or replace (POST/PUT, raw body) and delete one.
 */
import type { Readable } from 'node:stream';
import Joi from 'joi';
import { badRequest, empty, raw, resourceUrl, sync, type ApiRequest, type PluginContext, type RouteDescriptor, type VerbSpec } from '../../../sdk/index.js';
import type { InstanceManager } from '../manager.js';
import { checkTemplateName, deleteTemplate, listTemplates, MAX_TEMPLATE_BYTES, readTemplate, writeTemplate } from '../templates/template-files.js';
import { instancePaths } from './paths.js';

/** `?path=`: the template's file name (checked by the handler). */
const TEMPLATE_QUERY = Joi.object({ path: Joi.string().allow('').description('File name of the template') }).unknown(true);

/** Read and discard the rest of a body the handler refused, so the client sees the answer. */
async function drain(body: NodeJS.ReadableStream | undefined): Promise<void> {
  const stream = body as Readable | undefined;
  if (!stream || stream.readableEnded || stream.destroyed) return;
  await new Promise<void>((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', () => resolve());
    stream.resume();
  });
}

async function readBody(body: NodeJS.ReadableStream | undefined): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  if (!body) return Buffer.alloc(0);
  // Not destroyed on a refusal, so drain() can read the rest and the client sees the answer.
  for await (const chunk of (body as Readable).iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer | string>) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    size += buf.length;
    if (size > MAX_TEMPLATE_BYTES) throw badRequest(`A template may not be larger than ${MAX_TEMPLATE_BYTES} bytes`);
    chunks.push(buf);
  }
  return Buffer.concat(chunks);
}

export function metadataTemplateRoutes(ctx: PluginContext, manager: InstanceManager): RouteDescriptor {
  const event = (action: string, req: ApiRequest, name: string, file: string) => ctx.events.lifecycle(action,
    resourceUrl(`/1.0/instances/${encodeURIComponent(name)}/metadata/templates`, req.project),
    { project: req.project, requestor: req.requestor, context: { path: file } });

  const store: VerbSpec = {
    query: TEMPLATE_QUERY,
    rawBody: true,
    maxBytes: MAX_TEMPLATE_BYTES,
    handler: async (req) => {
      try {
        const file = checkTemplateName(req.query.path);
        const { project, name } = await manager.load(req.project, req.params.name);
        // Read the whole body before taking the lock: a slow upload must not hold up the instance.
        const body = await readBody(req.rawBody);
        await manager.lock.run(`${project}/${name}`, async () => {
          await writeTemplate((await manager.load(project, name)).inst.volumePath, file, body);
        });
        event('instance-metadata-template-created', req, name, file);
        return empty();
      } finally {
        await drain(req.rawBody);
      }
    },
  };

  return {
    ...instancePaths('/{name}/metadata/templates'),
    get: {
      query: TEMPLATE_QUERY,
      // The list of templates, or (with ?path=) one template's content.
      answers: ['sync', 'raw'],
      handler: async (req) => {
        const handle = await manager.load(req.project, req.params.name);
        if (!req.query.path) return sync(await listTemplates(handle.inst.volumePath));
        const file = checkTemplateName(req.query.path);
        const content = await readTemplate(handle.inst.volumePath, file);
        event('instance-metadata-template-retrieved', req, handle.name, file);
        const filename = /^[\w.+-]+$/.test(file) ? file : `"${encodeURIComponent(file)}"`;
        return raw(content, 'application/octet-stream', { 'Content-Disposition': `inline;filename=${filename}` });
      },
    },
    post: store,
    put: store,
    delete: {
      query: TEMPLATE_QUERY,
      handler: async (req) => {
        const file = checkTemplateName(req.query.path);
        const { project, name } = await manager.load(req.project, req.params.name);
        await manager.lock.run(`${project}/${name}`, async () => {
          await deleteTemplate((await manager.load(project, name)).inst.volumePath, file);
        });
        event('instance-metadata-template-deleted', req, name, file);
        return empty();
      },
    },
  };
}
