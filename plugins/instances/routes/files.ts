/**
 * /1.0/instances/{name}/files?path=: read, write and delete files of an instance. A container's
 * go through root-fs, which keeps every operation inside the instance's root filesystem and the
 * directories its disk devices mount, resolving paths as the container sees them, so it works the
 * same whether the instance runs or not. A driver that offers `files` (a VM's guest agent) serves
 * them instead, while the instance runs.
 */
import path from 'node:path';
import { Readable } from 'node:stream';
import Joi from 'joi';
import {
  ApiError, badRequest, conflict, empty, InstanceFileError, notFound, raw, sync, type ApiRequest, type InstanceFiles,
  type PluginContext, type RouteDescriptor,
} from '../../../sdk/index.js';
import type { InstanceHandle } from '../access.js';
import type { InstanceManager } from '../manager.js';
import { entryHeaders, parsePushHeaders, type PushHeaders } from '../files/headers.js';
import { containerTree } from '../files/mounts.js';
import { mkdirInRoot, readInRoot, removeInRoot, RootFsError, symlinkInRoot, writeFileInRoot, type ContainerTree } from '../files/root-fs.js';
import { instancePaths } from './paths.js';

/** `?path=`: the file, as the instance sees it (checked by the handler, which words its own refusals). */
const PATH_QUERY = Joi.object({ path: Joi.string().allow('').description('Path of the file inside the instance') }).unknown(true);

/** Uploads are streamed to disk; the bound is only there to have one. */
const MAX_PUSH_BYTES = 1024 ** 4;
const MAX_LINK_TARGET = 4095;

function targetPath(req: ApiRequest): string {
  const target = req.query.path;
  if (target === undefined || target === '') throw badRequest('Missing path argument');
  if (target.includes('\0')) throw badRequest('Invalid path argument');
  return target;
}

/**
 * The path as a driver gets it: absolute and normalised. Clients send paths relative to `/` too
 * (`lxc file pull c1/etc/hosts` asks for `etc/hosts`), which root-fs resolves the same way.
 */
const insidePath = (target: string) => path.posix.resolve('/', target);

/** Where an instance's files are: its tree on the host, or its driver (a running VM's agent). */
type FileAccess =
  | { handle: InstanceHandle; root: ContainerTree; files?: undefined }
  | { handle: InstanceHandle; files: InstanceFiles; root?: undefined };

async function accessOf(manager: InstanceManager, req: ApiRequest): Promise<FileAccess> {
  const handle = await manager.load(req.project, req.params.name);
  if (handle.driver.files) {
    // Nothing answers for a stopped VM's disk: the reference too needs the running agent.
    if ((await handle.driver.status(handle.inst)) !== 'Running') throw badRequest('The instance must be running to access its files');
    return { handle, files: handle.driver.files(handle.inst) };
  }
  if (handle.record.type !== 'container') throw badRequest('File access is only available for containers');
  // An empty volume path means the pool's driver is missing: never resolve relative to our cwd.
  if (!path.isAbsolute(handle.rootfs)) throw new ApiError(500, 'The instance storage is not available');
  return { handle, root: await containerTree(handle, manager.deps.devices, manager.deviceRuntime) };
}

/** Client mistakes become 4xx with the reason; anything unexpected stays a 500. */
function apiError(err: unknown): unknown {
  if (!(err instanceof RootFsError) && !(err instanceof InstanceFileError)) return err;
  switch (err.code) {
    case 'ENOENT':
    case 'ENOTDIR':
      return notFound(err.message);
    case 'EEXIST':
      return conflict(err.message);
    case 'ELOOP': case 'EISDIR': case 'ENOTEMPTY': case 'EINVAL': case 'ENAMETOOLONG': case 'EBUSY':
    case 'EPERM': case 'EACCES': case 'EROFS':
      return badRequest(err.message);
    default:
      return new ApiError(500, err.message);
  }
}

async function readSmall(body: NodeJS.ReadableStream | undefined, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  if (!body) return Buffer.alloc(0);
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw badRequest('The symlink target is too long');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function contentDisposition(target: string): Record<string, string> {
  const base = path.posix.basename(target);
  // Only names that are safe verbatim in a header; the rest go without.
  return /^[\x20-\x7e]+$/.test(base) && !/[";\\]/.test(base) ? { 'Content-Disposition': `inline;filename=${base}` } : {};
}

/** A push served by the driver: the same headers, the same refusals. */
async function pushThrough(files: InstanceFiles, target: string, opts: PushHeaders, body: NodeJS.ReadableStream | undefined): Promise<void> {
  const owner = { uid: opts.uid, gid: opts.gid, mode: opts.mode, append: opts.append };
  switch (opts.type) {
    case 'directory':
      body?.resume();
      return files.put(target, { ...owner, type: 'directory' });
    case 'symlink': {
      const linkTarget = (await readSmall(body, MAX_LINK_TARGET)).toString('utf8');
      if (linkTarget === '') throw badRequest('A symlink needs its target as the request body');
      return files.put(target, { ...owner, type: 'symlink', target: linkTarget });
    }
    default: {
      // The request is a Readable already; anything else is wrapped rather than trusted to be one.
      const content = body instanceof Readable ? body : Readable.from((body ?? []) as AsyncIterable<Buffer>);
      return files.put(target, { ...owner, type: 'file', content });
    }
  }
}

export function filesRoutes(_ctx: PluginContext, manager: InstanceManager): RouteDescriptor {
  return {
    ...instancePaths('/{name}/files'),
    get: {
      query: PATH_QUERY,
      // A directory's listing, or a file's (or symlink's) content.
      answers: ['sync', 'raw'],
      handler: async (req) => {
        const target = targetPath(req);
        const { handle, root, files } = await accessOf(manager, req);
        if (files) {
          const entry = await files.get(insidePath(target)).catch((err) => { throw apiError(err); });
          manager.lifecycle('instance-file-retrieved', handle, req, { path: target });
          const headers = entryHeaders({ ...entry.info, size: 0 });
          if (entry.kind === 'directory') return sync(entry.entries, { headers });
          if (entry.kind === 'symlink') return raw(entry.target, 'application/octet-stream', headers);
          return raw(entry.content, 'application/octet-stream', { ...headers, ...contentDisposition(target) });
        }
        const found = await readInRoot(root, target).catch((err) => { throw apiError(err); });
        manager.lifecycle('instance-file-retrieved', handle, req, { path: target });
        const headers = entryHeaders(found);
        switch (found.kind) {
          case 'directory':
            return sync(found.entries, { headers });
          case 'symlink':
            return raw(found.target, 'application/octet-stream', headers);
          default:
            // No Content-Length: a file a running container writes to may change size while it streams.
            return raw(found.stream, 'application/octet-stream', { ...headers, ...contentDisposition(target) });
        }
      },
    },
    post: {
      query: PATH_QUERY,
      rawBody: true,
      maxBytes: MAX_PUSH_BYTES,
      handler: async (req) => {
        const target = targetPath(req);
        const opts = parsePushHeaders(req.headers);
        const { handle, root, files } = await accessOf(manager, req);
        const owner = { uid: opts.uid, gid: opts.gid, mode: opts.mode };
        try {
          if (files) {
            await pushThrough(files, insidePath(target), opts, req.rawBody);
            manager.lifecycle('instance-file-pushed', handle, req, { path: target });
            return empty();
          }
          switch (opts.type) {
            case 'directory':
              req.rawBody?.resume();
              // Missing parents are made too (the reference answers 404; docs/decisions/0004-instance-files.md).
              await mkdirInRoot(root, target, { ...owner, parents: true });
              break;
            case 'symlink': {
              const linkTarget = (await readSmall(req.rawBody, MAX_LINK_TARGET)).toString('utf8');
              if (linkTarget === '') throw badRequest('A symlink needs its target as the request body');
              await symlinkInRoot(root, target, linkTarget, owner);
              break;
            }
            default:
              // `lxc file push` always sends the local file's owner and mode; the reference applies them to new files only.
              await writeFileInRoot(root, target, req.rawBody ?? Buffer.alloc(0), { ...owner, append: opts.append, keepExisting: true });
          }
        } catch (err) {
          throw apiError(err);
        }
        manager.lifecycle('instance-file-pushed', handle, req, { path: target });
        return empty();
      },
    },
    delete: {
      query: PATH_QUERY,
      handler: async (req) => {
        const target = targetPath(req);
        const { handle, root, files } = await accessOf(manager, req);
        const removal = files ? files.delete(insidePath(target)) : removeInRoot(root, target);
        await removal.catch((err) => { throw apiError(err); });
        manager.lifecycle('instance-file-deleted', handle, req, { path: target });
        return empty();
      },
    },
  };
}
