/**
 * Packing a directory laid out like an unpacked image into a unified image tarball: the host's
 * tar writes the stream, the host's compressor (if any) squeezes it, and the result is hashed as
 * it is written, so the fingerprint is known the moment the file is complete.
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { HostProcess, HostTools } from '../../sdk/index.js';
import type { Compressor } from './compressors.js';

export interface PackSpec {
  /** Directory holding `metadata.yaml` (the source's own or a rewritten one). */
  metadataDir: string;
  /** Source directory and the members of it to pack (`rootfs`, `templates`...). */
  dir: string;
  members: string[];
  /** More members from another directory (a VM's qcow2 disk, converted beside the source). */
  extra?: { dir: string; members: string[] };
  compressor: Compressor;
  /** Created; must not exist. */
  out: string;
  signal?: AbortSignal;
  /** Uncompressed bytes written by tar so far. */
  onProgress?: (bytes: number) => void;
}

export interface Packed {
  fingerprint: string;
  size: number;
}

/**
 * Numeric ids as stored on disk (volumes keep the container's ids), extended attributes (file
 * capabilities), and a stable output for unchanged content: members sorted, no access or change
 * times, pax header names without a process id.
 */
function tarArgs(spec: PackSpec): string[] {
  return [
    '-c', '-f', '-', '--numeric-owner', '--xattrs', '--xattrs-include=*', '--format=posix',
    '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime', '--sort=name',
    '-C', spec.metadataDir, 'metadata.yaml', '-C', spec.dir, ...spec.members,
    ...(spec.extra ? ['-C', spec.extra.dir, ...spec.extra.members] : []),
  ];
}

function stderrOf(proc: HostProcess): () => string {
  let text = '';
  proc.stderr?.on('data', (c: Buffer) => {
    if (text.length < 4096) text += c.toString();
  });
  return () => text;
}

function failure(command: string, code: number, stderr: string): Error {
  if (code === 127) return new Error(`Packing the image needs "${command}" on this host, and it is not installed`);
  // tar closes with a summary line; the first line names the cause.
  const line = stderr.trim().split('\n').find((l) => l && !/Exiting with failure status/.test(l));
  return new Error(`Packing the image failed: ${line ? (line.startsWith(`${command}:`) ? line : `${command}: ${line}`) : `${command} exited with status ${code}`}`);
}

/** How a flow breaks when a process at one end is gone: the process's own failure says more. */
const PROCESS_ENDED = new Set(['EPIPE', 'ERR_STREAM_PREMATURE_CLOSE']);

export async function packImage(tools: HostTools, spec: PackSpec): Promise<Packed> {
  const tar = tools.spawn('tar', tarArgs(spec), { endWithDaemon: true });
  tar.stdin.end();
  const tarErr = stderrOf(tar);
  const { command, args } = spec.compressor;
  const squeeze = command ? tools.spawn(command, args, { endWithDaemon: true }) : undefined;
  const squeezeErr = squeeze ? stderrOf(squeeze) : () => '';

  let packed = 0;
  const count = new Transform({
    transform(chunk: Buffer, _enc, done) {
      packed += chunk.length;
      spec.onProgress?.(packed);
      done(null, chunk);
    },
  });
  const hash = createHash('sha256');
  let size = 0;
  const digest = new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  const out = createWriteStream(spec.out, { flags: 'wx', mode: 0o600 });

  const kill = () => {
    tar.kill('SIGKILL');
    squeeze?.kill('SIGKILL');
  };
  spec.signal?.addEventListener('abort', kill, { once: true });
  if (spec.signal?.aborted) kill();
  try {
    const flows = squeeze
      ? [pipeline(tar.stdout, count, squeeze.stdin), pipeline(squeeze.stdout, digest, out)]
      : [pipeline(tar.stdout, count, digest, out)];
    const settled = await Promise.allSettled(flows);
    const broken = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected')?.reason as NodeJS.ErrnoException | undefined;
    // A broken flow leaves the other process waiting on it.
    if (broken) kill();
    const [tarCode, squeezeCode] = await Promise.all([tar.exited, squeeze?.exited ?? Promise.resolve(0)]);
    if (spec.signal?.aborted) throw new Error('Packing the image was cancelled');
    // Writing failed (disk full): the processes were killed for it and say nothing useful.
    if (broken && !PROCESS_ENDED.has(broken.code ?? '')) throw new Error(`Packing the image failed: ${broken.message}`);
    // The compressor first: when it dies, tar only reports the broken pipe.
    if (squeezeCode !== 0) throw failure(command!, squeezeCode, squeezeErr());
    if (tarCode !== 0) throw failure('tar', tarCode, tarErr());
    if (broken) throw new Error(`Packing the image failed: ${broken.message}`);
  } finally {
    spec.signal?.removeEventListener('abort', kill);
    out.destroy();
  }
  return { fingerprint: hash.digest('hex'), size };
}
