/**
 * Writing a backup tarball in the reference's layout: `backup/index.yaml`, then one member
 * directory per part (instances: `backup/snapshots/<name>/` for each snapshot, then
 * `backup/container/`, each with a generated `backup.yaml`; virtual machines the same under
 * `virtual-machine-snapshots` and `virtual-machine`, each disk beside its directory as
 * `<member>.img`; custom volumes:
 * `backup/volume-snapshots/<name>/`, then `backup/volume/`), each holding a volume's content.
 * An optimized backup has one file per part instead (`backup/snapshots/<name>.bin`, ...,
 * `backup/container.bin`: the driver's stream) and `backup/optimized_header.yaml`.
 *
 * tar runs in a private mount namespace where a tmpfs staging tree gets the generated files and
 * read-only bind mounts of the volume's entries, so member names come out right without copying
 * anything, the volumes are never written to, and nothing needs cleaning after a crash (the
 * namespace and its mounts vanish with the process).
 */
import { createWriteStream } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import { finished, pipeline } from 'node:stream/promises';
import { backupCompressArgs, type BackupAlgorithm } from './compression.js';
import { backupProgressText } from './names.js';
import { internalError } from '../../errors.js';
import type { OperationControl } from '../../operations.js';
import type { HostProcess, HostTools } from '../../host-tools.js';

export interface BackupTarballPart {
  /** Member directory, e.g. `backup/container` or `backup/volume-snapshots/<name>`; or member file (`backup/container.bin`). */
  member: string;
  /** Host directory whose content goes in. */
  dir?: string;
  /** Or a host file that goes in as the member (an optimized part, written by the caller). */
  file?: string;
  /** File holding the part's generated backup.yaml (instances); the volume's own is then left out. */
  backupYaml?: string;
  /** Top-level entries of `dir` left out (a VM's disk image, archived as a part of its own). */
  exclude?: string[];
}

export interface BackupTarballSpec {
  /** Where the compressed tarball is written (a temporary name; the caller renames it). */
  output: string;
  algorithm: BackupAlgorithm;
  /** An empty directory the staging tmpfs is mounted on, inside the namespace only. */
  stagingMount: string;
  /** File holding index.yaml. */
  indexYaml: string;
  /** File holding optimized_header.yaml (optimized backups whose driver describes its parts). */
  optimizedHeader?: string;
  /** In archive order: snapshots (oldest first), then the instance. */
  parts: BackupTarballPart[];
  /** The operation that shows `create_backup_progress` (at most once a second) and can cancel the write. */
  op?: OperationControl;
}

/** Exit status of the staging script itself, distinct from tar's own (0, 1 or 2). */
const STAGING_FAILED = 90;

/**
 * Builds the staging tree from its arguments, then becomes tar. Operations:
 *   file SRC DEST MODE   copy a generated file
 *   dir  REF DEST        a directory with REF's owner and mode
 *   bind SRC DEST        mount SRC read-only at DEST
 *   link SRC DEST        copy a symlink as it is
 *   times REF DEST       DEST gets REF's times (last: filling a directory changes them)
 *   tar ARGS...          run tar in the staging tree
 */
const STAGE_SCRIPT = `
fail() { echo "staging the backup failed: $*" >&2; exit ${STAGING_FAILED}; }
stage=$1; shift
mount -t tmpfs -o mode=0700 corral-backup "$stage" || fail "tmpfs on $stage"
while [ $# -gt 0 ]; do
  case "$1" in
    file) mkdir -p "$(dirname "$stage/$3")" && cp "$2" "$stage/$3" && chmod "$4" "$stage/$3" || fail "$3"; shift 4 ;;
    dir) mkdir -p "$stage/$3" && chown --reference="$2" "$stage/$3" && chmod --reference="$2" "$stage/$3" || fail "$3"; shift 3 ;;
    bind) mkdir -p "$(dirname "$stage/$3")" && { if [ -d "$2" ]; then mkdir "$stage/$3"; else : > "$stage/$3"; fi; } &&
      mount --bind "$2" "$stage/$3" && mount -o remount,bind,ro "$stage/$3" || fail "$3"; shift 3 ;;
    link) cp -P "$2" "$stage/$3" || fail "$3"; shift 3 ;;
    times) touch -h -r "$2" "$stage/$3" || fail "$3"; shift 3 ;;
    tar) shift; cd "$stage" || fail "cd"; exec tar "$@" ;;
    *) fail "unknown operation $1" ;;
  esac
done
fail "no tar operation"
`;

/** The top-level entries of a part: bind mounts for files and directories, copies for symlinks. */
async function partOperations(part: BackupTarballPart): Promise<string[]> {
  if (part.file) return ['bind', part.file, part.member];
  if (!part.dir) throw internalError(`backup part ${part.member} has neither a directory nor a file`);
  const ops = ['dir', part.dir, part.member];
  for (const entry of (await readdir(part.dir)).sort()) {
    // Ours is generated; a stale one from an imported volume is left out.
    if ((part.backupYaml && entry === 'backup.yaml') || part.exclude?.includes(entry)) continue;
    const source = path.join(part.dir, entry);
    const st = await lstat(source);
    const dest = `${part.member}/${entry}`;
    if (st.isSymbolicLink()) ops.push('link', source, dest);
    else if (st.isDirectory() || st.isFile()) ops.push('bind', source, dest);
    // Sockets and the like at the top of a volume are nothing a backup needs.
  }
  if (part.backupYaml) ops.push('file', part.backupYaml, `${part.member}/backup.yaml`, '0400');
  ops.push('times', part.dir, part.member);
  return ops;
}

function tail(text: string): string {
  return text.trim().split('\n').slice(-3).join(' ');
}

function collectStderr(proc: HostProcess): () => string {
  let text = '';
  proc.stderr?.on('data', (c: Buffer) => {
    if (text.length < 64 * 1024) text += c.toString('utf8');
  });
  return () => text;
}

/**
 * Drops the end-of-archive marker (two zero blocks, all there is with a blocking factor of 1) from
 * a part's tar stream, so the parts join into one archive.
 */
function withoutTrailer(): Transform {
  const TRAILER = 1024;
  let held = Buffer.alloc(0);
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      held = Buffer.concat([held, chunk]);
      const pass = held.length - TRAILER;
      if (pass <= 0) return done();
      const out = held.subarray(0, pass);
      held = held.subarray(pass);
      done(null, out);
    },
    flush(done) {
      done(held.length === TRAILER && held.every((b) => b === 0) ? null : internalError('tar did not end its archive as expected'));
    },
  });
}

/**
 * One tar run per part, joined into one archive: tar links a file to an earlier member with the
 * same inode, and a member linked into another part would break an import that extracts only
 * `backup/container` (as the reference's does). Snapshots share symlink inodes with their volume
 * on dir pools, so links must stay within a part.
 */
export async function writeBackupTarball(hostTools: HostTools, spec: BackupTarballSpec): Promise<void> {
  const head = { ops: ['file', spec.indexYaml, 'backup/index.yaml', '0644'], members: ['backup/index.yaml'] };
  if (spec.optimizedHeader) {
    head.ops.push('file', spec.optimizedHeader, 'backup/optimized_header.yaml', '0644');
    head.members.push('backup/optimized_header.yaml');
  }
  const groups: { ops: string[]; members: string[] }[] = [head];
  for (const part of spec.parts) groups.push({ ops: await partOperations(part), members: [part.member] });
  const tarArgs = [
    '-c', '-f', '-', '--blocking-factor=1', '--numeric-owner', '--format=posix', '--xattrs', '--xattrs-include=*',
    // Without these every member gets a pax header for its sub-second times.
    '--pax-option=delete=atime,delete=ctime,delete=mtime',
    // A VM's disk is mostly holes: archived as such (pax sparse members, which the reference's Go
    // reader expands), not as gigabytes of zeros through the compressor.
    '--sparse',
  ];
  const compressor = spec.algorithm === 'none' ? undefined : hostTools.spawn(spec.algorithm, backupCompressArgs[spec.algorithm], { endWithDaemon: true });
  const compressorErr = compressor ? collectStderr(compressor) : () => '';
  let current: HostProcess | undefined;
  const kill = () => {
    current?.kill('SIGKILL');
    compressor?.kill('SIGKILL');
  };
  const signal = spec.op?.signal;
  signal?.addEventListener('abort', kill, { once: true });

  const started = Date.now();
  let reported = 0;
  const onProgress = (done: number) => {
    if (!spec.op || Date.now() - reported < 1000) return;
    reported = Date.now();
    spec.op.updateMetadata({ create_backup_progress: backupProgressText(done, started) });
  };
  let bytes = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      onProgress(bytes);
      done(null, chunk);
    },
  });
  const out = createWriteStream(spec.output, { mode: 0o600 });
  const sink = compressor ? compressor.stdin : out;
  const written = compressor ? pipeline(compressor.stdout, out) : finished(out);
  counter.pipe(sink);
  try {
    for (const [i, group] of groups.entries()) {
      const last = i === groups.length - 1;
      const tar = hostTools.spawn('unshare', ['--mount', '--propagation', 'private', '--', 'sh', '-c', STAGE_SCRIPT, 'sh', spec.stagingMount, ...group.ops, 'tar', ...tarArgs, ...group.members], { endWithDaemon: true });
      current = tar;
      tar.stdin.end();
      const tarErr = collectStderr(tar);
      const stream = last ? tar.stdout : tar.stdout.pipe(withoutTrailer());
      const [flow, code] = await Promise.allSettled([pipeline(stream, counter, { end: last }), tar.exited]);
      if (signal?.aborted) throw internalError('The backup was cancelled');
      const tarCode = code.status === 'fulfilled' ? code.value : -1;
      // tar exits 1 when a file changed while it was read (a running instance): the archive is still whole.
      if (tarCode !== 0 && tarCode !== 1) throw internalError(`Creating the backup tarball failed (tar exit ${tarCode}): ${tail(tarErr())}`);
      if (flow.status === 'rejected') throw internalError(`Writing the backup failed: ${(flow.reason as Error).message}`);
    }
    const [flow, compressorCode] = await Promise.allSettled([written, compressor?.exited ?? Promise.resolve(0)]);
    if (compressorCode.status === 'fulfilled' && compressorCode.value !== 0) {
      throw internalError(`Compressing the backup failed (${spec.algorithm} exit ${compressorCode.value}): ${tail(compressorErr())}`);
    }
    if (flow.status === 'rejected') throw internalError(`Writing the backup failed: ${(flow.reason as Error).message}`);
  } catch (err) {
    kill();
    counter.destroy();
    out.destroy();
    throw err;
  } finally {
    signal?.removeEventListener('abort', kill);
  }
}
