/**
 * How far a host tool has read a file, without the file passing through the daemon: the offset
 * of the descriptor that has it open, in the tool's process or one of its children (tar hands a
 * compressed archive to its decompressor as stdin), read from /proc a few times a second.
 */
import { readdir, readFile, readlink } from 'node:fs/promises';
import path from 'node:path';

/** Often enough for a progress line, rare enough to cost nothing (a few small /proc reads). */
const POLL_MS = 250;
/** The first look comes sooner, so that even a short unpack shows where it is once. */
const FIRST_POLL_MS = 50;

const ignore = () => undefined;

/** `pid` and its descendants (Linux's per-task `children` lists). */
async function processTree(pid: number): Promise<number[]> {
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0 && found.length < 64) {
    const next = queue.shift()!;
    found.push(next);
    const tasks = await readdir(`/proc/${next}/task`).catch(() => [] as string[]);
    for (const task of tasks) {
      const children = await readFile(`/proc/${next}/task/${task}/children`, 'utf8').catch(() => '');
      for (const child of children.split(' ')) if (child.trim()) queue.push(Number(child));
    }
  }
  return found;
}

/** The largest read offset of `file` among the descriptors of `pid`'s tree; undefined when none has it open. */
export async function readPosition(pid: number, file: string): Promise<number | undefined> {
  let position: number | undefined;
  for (const proc of await processTree(pid)) {
    const fds = await readdir(`/proc/${proc}/fd`).catch(() => [] as string[]);
    for (const fd of fds) {
      if ((await readlink(`/proc/${proc}/fd/${fd}`).catch(ignore)) !== file) continue;
      const info = await readFile(`/proc/${proc}/fdinfo/${fd}`, 'utf8').catch(() => '');
      const pos = /^pos:\s*(\d+)/m.exec(info);
      if (pos) position = Math.max(position ?? 0, Number(pos[1]));
    }
  }
  return position;
}

/**
 * Tell `onRead` the bytes of `file` (an absolute path without links) that `pid` has read since the
 * last call, until the returned function stops it.
 */
export function followReads(pid: number, file: string, onRead: (bytes: number) => void): () => void {
  const target = path.resolve(file);
  let counted = 0;
  let busy = false;
  let stopped = false;
  const poll = () => {
    if (busy) return;
    busy = true;
    readPosition(pid, target).then((pos) => {
      if (!stopped && pos !== undefined && pos > counted) {
        onRead(pos - counted);
        counted = pos;
      }
    }, ignore).finally(() => (busy = false));
  };
  const first = setTimeout(poll, FIRST_POLL_MS);
  const timer = setInterval(poll, POLL_MS);
  first.unref();
  timer.unref();
  return () => {
    stopped = true;
    clearTimeout(first);
    clearInterval(timer);
  };
}
