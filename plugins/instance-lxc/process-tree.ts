/** A host process's descendants, read from /proc (every thread's `children` list). */
import { readdirSync } from 'node:fs';
import { readText } from './cgroups.js';

export function childrenOf(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const tid of tasks) {
    const list = readText(`/proc/${pid}/task/${tid}/children`)?.trim();
    if (list) for (const child of list.split(/\s+/)) out.push(Number(child));
  }
  return out;
}

/** Every descendant of `pid`, parents before their children. */
export function descendantsOf(pid: number): number[] {
  const out: number[] = [];
  const queue = childrenOf(pid);
  while (queue.length) {
    const next = queue.shift()!;
    if (out.includes(next)) continue;
    out.push(next);
    queue.push(...childrenOf(next));
  }
  return out;
}
