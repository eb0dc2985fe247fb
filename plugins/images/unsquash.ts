/**
 * Unpacking a squashfs rootfs with unsquashfs. It cannot read a pipe, so progress comes from its
 * own progress bar (`[===  ] written/total  NN%`, printed even when stdout is not a terminal),
 * turned into bytes of the squashfs file.
 */
import { stat } from 'node:fs/promises';
import { HostToolError, type HostTools } from '../../sdk/index.js';
import { TAR_TIMEOUT_MS } from './tarball.js';

const BAR = /(\d+)\/(\d+)\s+\d+%/g;

/** Extract `file` into `dir` (which may exist); `onRead` hears the bytes of `file` accounted for since the last call. */
export async function unsquash(tools: HostTools, file: string, dir: string, onRead?: (bytes: number) => void): Promise<void> {
  // -f: the target may exist (created empty by the volume); xattrs are extracted by default.
  if (!onRead) {
    await tools.run('unsquashfs', ['-f', '-n', '-q', '-d', dir, file], { timeoutMs: TAR_TIMEOUT_MS, endWithDaemon: true });
    return;
  }
  const size = (await stat(file)).size;
  const proc = tools.spawn('unsquashfs', ['-f', '-q', '-d', dir, file], { endWithDaemon: true });
  let counted = 0;
  let tail = '';
  proc.stdout.setEncoding('utf8');
  proc.stdout.on('data', (text: string) => {
    // The bar is redrawn after a carriage return; a redraw may straddle two reads.
    tail = (tail + text).slice(-512);
    let last: RegExpExecArray | undefined;
    for (const m of tail.matchAll(BAR)) last = m;
    if (!last) return;
    const [written, total] = [Number(last[1]), Number(last[2])];
    const now = total > 0 ? Math.floor((size * Math.min(written, total)) / total) : 0;
    if (now > counted) {
      onRead(now - counted);
      counted = now;
    }
  });
  let stderr = '';
  proc.stderr?.on('data', (c: Buffer) => {
    if (stderr.length < 16 * 1024) stderr += c.toString('utf8');
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill('SIGKILL');
  }, TAR_TIMEOUT_MS);
  proc.stdin.end();
  try {
    const code = await proc.exited;
    if (timedOut) throw new HostToolError('unsquashfs', `unsquashfs timed out after ${TAR_TIMEOUT_MS} ms`);
    if (code !== 0) throw new HostToolError('unsquashfs', `unsquashfs failed (exit ${code}): ${stderr.trim().split('\n').slice(-3).join(' ')}`, code);
  } finally {
    clearTimeout(timer);
  }
  if (size > counted) onRead(size - counted);
}
