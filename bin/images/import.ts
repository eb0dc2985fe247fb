/**
 * Imports an image into a running daemon over its unix socket, as `lxc image import --alias` does:
 * POST /1.0/images with the tarball (or a split image's two files, multipart) as the body, wait
 * for the operation, then point the alias at the new image (an alias that exists is moved to it,
 * as lxc moves it).
 */
import { createReadStream, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';

export interface ImportResult {
  fingerprint: string;
  /** The image the alias pointed at before, when it existed. */
  previous?: string;
}

export interface ImportProgress {
  /** Bytes of the tarball sent so far. */
  upload?(sent: number, total: number): void;
  /** The upload is done and the daemon is unpacking it. */
  unpacking?(): void;
}

/** What the user should be told: the daemon answered with an error, or could not be reached. */
export class ImportError extends Error {}

interface Answer {
  status: number;
  json: any;
}

function describeConnectError(socket: string, err: NodeJS.ErrnoException): ImportError {
  if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') {
    return new ImportError(`the daemon is not running: nothing answers on ${socket} (start it with npm start -- --dir <dir>, or pass the --dir it runs with)`);
  }
  if (err.code === 'EACCES') return new ImportError(`no permission to use ${socket} (run as root or as a member of its group)`);
  return new ImportError(`cannot reach the daemon on ${socket}: ${err.message}`);
}

function call(socket: string, method: string, path: string, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request({ socketPath: socket, method, path, headers: payload ? { 'content-type': 'application/json' } : {} }, (res) => read(res, resolve));
    req.on('error', (err) => reject(describeConnectError(socket, err)));
    req.end(payload);
  });
}

function read(res: http.IncomingMessage, resolve: (answer: Answer) => void): void {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => {
    let json: any;
    try { json = JSON.parse(Buffer.concat(chunks).toString('utf8')); } catch { /* not JSON */ }
    resolve({ status: res.statusCode ?? 0, json });
  });
}

/** A body part: a file streamed as it is, after its headers. */
interface BodyPart {
  head: Buffer;
  file: string;
  size: number;
}

/** POST /1.0/images with `parts` one after another as the body, counting what has been sent. */
function upload(socket: string, parts: BodyPart[], tail: Buffer, contentType: string, progress: ImportProgress): Promise<Answer> {
  const total = parts.reduce((sum, part) => sum + part.head.length + part.size, tail.length);
  return new Promise((resolve, reject) => {
    const req = http.request({
      socketPath: socket, method: 'POST', path: '/1.0/images',
      headers: { 'content-type': contentType, 'content-length': total, 'x-lxd-public': '0' },
    }, (res) => read(res, resolve));
    req.on('error', (err) => reject(describeConnectError(socket, err)));
    let sent = 0;
    const count = (bytes: number) => {
      sent += bytes;
      progress.upload?.(sent, total);
    };
    const send = async () => {
      for (const part of parts) {
        if (!req.write(part.head)) await once(req, 'drain');
        count(part.head.length);
        for await (const chunk of createReadStream(part.file)) {
          if (!req.write(chunk)) await once(req, 'drain');
          count((chunk as Buffer).length);
        }
      }
      req.end(tail);
      count(tail.length);
      progress.unpacking?.();
    };
    send().catch((err) => {
      req.destroy();
      reject(err);
    });
  });
}

/** The whole image as one tarball. */
function uploadTarball(socket: string, tarball: string, progress: ImportProgress): Promise<Answer> {
  return upload(socket, [{ head: Buffer.alloc(0), file: tarball, size: statSync(tarball).size }], Buffer.alloc(0), 'application/octet-stream', progress);
}

/**
 * A split image as `lxc image import meta rootfs` sends it: multipart/form-data with the parts
 * `metadata` then `rootfs` (or `rootfs.img` for a virtual machine's disk).
 */
function uploadSplit(socket: string, split: SplitImage, progress: ImportProgress): Promise<Answer> {
  const boundary = `corral-${randomBytes(12).toString('hex')}`;
  const head = (name: string) => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`);
  const parts: BodyPart[] = [
    { head: head('metadata'), file: split.metadata, size: statSync(split.metadata).size },
    { head: Buffer.concat([Buffer.from('\r\n'), head(split.rootfsPart)]), file: split.rootfs, size: statSync(split.rootfs).size },
  ];
  return upload(socket, parts, Buffer.from(`\r\n--${boundary}--\r\n`), `multipart/form-data; boundary=${boundary}`, progress);
}

/** The two files of a split image and the name of the rootfs part. */
export interface SplitImage {
  metadata: string;
  rootfs: string;
  rootfsPart: 'rootfs' | 'rootfs.img';
}

const failure = (what: string, answer: Answer) => new ImportError(`${what}: ${answer.json?.error || `the daemon answered ${answer.status}`}`);

/** Checks that a daemon answers on `socket` before anything is built. */
export async function checkDaemon(socket: string): Promise<void> {
  const answer = await call(socket, 'GET', '/1.0');
  if (answer.status !== 200) throw failure('the daemon refused GET /1.0', answer);
}

/** The image `alias` points at now, or undefined when there is no such alias. */
export async function aliasTarget(socket: string, alias: string): Promise<string | undefined> {
  const answer = await call(socket, 'GET', `/1.0/images/aliases/${encodeURIComponent(alias)}`);
  if (answer.status === 404) return undefined;
  if (answer.status !== 200) throw failure(`reading the alias ${alias}`, answer);
  return answer.json.metadata.target;
}

/** Import a unified tarball (a path) or a split image, and point `alias` at it. */
export async function importImage(socket: string, image: string | SplitImage, alias: string, progress: ImportProgress = {}): Promise<ImportResult> {
  const accepted = typeof image === 'string' ? await uploadTarball(socket, image, progress) : await uploadSplit(socket, image, progress);
  if (accepted.status !== 202 || !accepted.json?.operation) throw failure('the daemon refused the image', accepted);
  const done = await call(socket, 'GET', `${accepted.json.operation}/wait?timeout=-1`);
  const op = done.json?.metadata;
  if (done.status !== 200 || op?.status !== 'Success') throw new ImportError(`the import failed: ${op?.err || done.json?.error || `the daemon answered ${done.status}`}`);
  const fingerprint: string = op.metadata.fingerprint;
  const previous = await aliasTarget(socket, alias);
  const aliased = previous === undefined
    ? await call(socket, 'POST', '/1.0/images/aliases', { name: alias, target: fingerprint, description: '' })
    : await call(socket, 'PATCH', `/1.0/images/aliases/${encodeURIComponent(alias)}`, { target: fingerprint });
  if (aliased.status !== 200 && aliased.status !== 201) {
    // The image alone, unnamed, is not what was asked for: take it out again.
    const removal = await call(socket, 'DELETE', `/1.0/images/${fingerprint}`).catch(() => undefined);
    if (removal?.json?.operation) await call(socket, 'GET', `${removal.json.operation}/wait?timeout=60`).catch(() => undefined);
    throw failure(`naming the image ${alias}`, aliased);
  }
  return { fingerprint, previous };
}
