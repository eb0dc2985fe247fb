/**
 * A VM's files for the instances family (sdk InstanceFiles) through its guest agent, with the
 * semantics the file routes give containers: an entry is not followed when read; a pushed file
 * that exists keeps its owner and mode; an append needs the file; a directory comes with its
 * missing parents.
 */
import path from 'node:path';
import { InstanceFileError, type InstanceFileEntry, type InstanceFilePut, type InstanceFiles } from '../../../sdk/index.js';
import type { GuestAgent, GuestFileInfo } from './contract.js';

/** What the agent keeps as it is. */
const KEEP = -1;

async function statOrNone(agent: GuestAgent, target: string): Promise<GuestFileInfo | undefined> {
  try {
    return await agent.stat(target);
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return undefined;
    throw err;
  }
}

function withTime(info: GuestFileInfo) {
  return { ...info, mtime: info.mtime ?? new Date(0) };
}

async function makeDirectories(agent: GuestAgent, target: string, spec: InstanceFilePut): Promise<void> {
  const missing: string[] = [];
  for (let at = target; at !== '/'; at = path.posix.dirname(at)) {
    const found = await statOrNone(agent, at);
    if (found?.kind === 'directory') break;
    if (found) throw new InstanceFileError(at === target ? 'EEXIST' : 'ENOTDIR', `Not a directory: ${at}`);
    missing.unshift(at);
  }
  for (const dir of missing) {
    await agent.write(dir, { kind: 'directory', uid: spec.uid ?? 0, gid: spec.gid ?? 0, mode: dir === target ? spec.mode ?? 0o755 : 0o755 });
  }
}

async function putFile(agent: GuestAgent, target: string, spec: InstanceFilePut): Promise<void> {
  const existing = await statOrNone(agent, target);
  if (existing?.kind === 'directory') throw new InstanceFileError('EISDIR', `Is a directory: ${target}`);
  if (spec.append && !existing) throw new InstanceFileError('ENOENT', `No such file or directory: ${target}`);
  await agent.write(target, {
    kind: 'file',
    uid: existing ? KEEP : spec.uid ?? 0,
    gid: existing ? KEEP : spec.gid ?? 0,
    mode: existing ? KEEP : spec.mode ?? 0o644,
    append: spec.append,
    content: spec.content,
  });
}

export function agentFiles(agent: GuestAgent): InstanceFiles {
  return {
    async get(target): Promise<InstanceFileEntry> {
      const info = await agent.stat(target);
      if (info.kind === 'directory') {
        const listing = await agent.readDirectory(target);
        return { kind: 'directory', info: withTime(listing.info), entries: listing.entries };
      }
      if (info.kind === 'symlink') {
        const link = await agent.readLink(target);
        return { kind: 'symlink', info: withTime(link.info), target: link.target };
      }
      const file = await agent.readFile(target);
      return { kind: 'file', info: withTime(file.info), content: file.content };
    },
    async put(target, spec) {
      if (!target.startsWith('/')) throw new InstanceFileError('EINVAL', `The path must be absolute: ${target}`);
      switch (spec.type) {
        case 'directory':
          return makeDirectories(agent, path.posix.normalize(target), spec);
        case 'symlink':
          return agent.write(target, { kind: 'symlink', uid: spec.uid ?? 0, gid: spec.gid ?? 0, mode: 0o777, target: spec.target });
        default:
          return putFile(agent, target, spec);
      }
    },
    delete: (target) => agent.remove(target),
  };
}
