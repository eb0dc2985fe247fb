/**
 * The host's cgroup layout (v1 hierarchies, the unified v2 one, or both) and the files of one
 * container's cgroup. Everything here is read with plain synchronous file reads: status and state
 * are asked for hundreds of instances per listing and must not spawn anything.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Controller } from './limits.js';

export function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

export function readNumber(file: string): number | undefined {
  return asNumber(readText(file));
}

function asNumber(content: string | undefined): number | undefined {
  const text = content?.trim();
  return text !== undefined && /^\d+$/.test(text) ? Number(text) : undefined;
}

export type CgroupFile = { version: 1 | 2; path: string };

export class CgroupHost {
  /** v1 controller name -> mount point of its hierarchy. */
  readonly v1 = new Map<string, string>();
  readonly unifiedMount: string | undefined;
  readonly unifiedControllers: Set<string>;

  constructor(mounts: string) {
    let unified: string | undefined;
    for (const line of mounts.split('\n')) {
      const [, mountPoint, type, options] = line.split(' ');
      if (!mountPoint) continue;
      const where = mountPoint.replace(/\\040/g, ' ');
      if (type === 'cgroup2') unified ??= where;
      if (type !== 'cgroup') continue;
      for (const opt of options!.split(',')) {
        if (['rw', 'ro', 'relatime', 'nosuid', 'nodev', 'noexec'].includes(opt) || opt.includes('=')) continue;
        this.v1.set(opt, where);
      }
    }
    this.unifiedMount = unified;
    this.unifiedControllers = new Set((unified && readText(path.join(unified, 'cgroup.controllers'))?.trim().split(/\s+/).filter(Boolean)) || []);
  }

  static read(): CgroupHost {
    return new CgroupHost(readText('/proc/self/mounts') ?? '');
  }

  /** Only the unified hierarchy: limits go in `lxc.cgroup2.*`. */
  get pureV2(): boolean {
    return this.v1.size === 0 && this.unifiedMount !== undefined;
  }

  /** Which hierarchy holds a controller: its v1 hierarchy first, as liblxc does on hybrid hosts. */
  versionOf(controller: string): 1 | 2 | undefined {
    if (this.v1.has(controller)) return 1;
    if (this.unifiedControllers.has(controller)) return 2;
    return undefined;
  }

  /**
   * Enable a unified-hierarchy controller for the cgroups liblxc makes below the daemon's own
   * (`+<controller>` in each `cgroup.subtree_control` from the root down). liblxc does not do it on
   * a hybrid host, so a v2-only controller (hugetlb here) would have no files in the container's
   * cgroup. Throws with the kernel's reason when a level refuses.
   */
  delegateUnified(controller: string, selfCgroup = readText('/proc/self/cgroup') ?? ''): void {
    if (!this.unifiedMount) throw new Error('the host has no unified cgroup hierarchy');
    const own = selfCgroup.split('\n').find((l) => l.startsWith('0::'))?.slice(3) ?? '/';
    const parts = own.split('/').filter(Boolean);
    for (let depth = 0; depth <= parts.length; depth++) {
      const file = path.join(this.unifiedMount, ...parts.slice(0, depth), 'cgroup.subtree_control');
      if (readText(file)?.split(/\s+/).includes(controller)) continue;
      writeFileSync(file, `+${controller}`);
    }
  }

  /** The config key prefix that sets a file of this controller. */
  configPrefix(controller: Controller): string {
    return this.versionOf(controller) === 2 || this.pureV2 ? 'lxc.cgroup2' : 'lxc.cgroup';
  }
}

/** Cut a cgroup path after the container's own `lxc.payload.*` directory (its init may sit below). */
function payloadPath(p: string): string {
  const parts = p.split('/');
  const i = parts.findIndex((s) => s.startsWith('lxc.payload.'));
  return i >= 0 ? parts.slice(0, i + 1).join('/') || '/' : p;
}

export class ContainerCgroup {
  constructor(
    private readonly host: CgroupHost,
    /** v1 controller -> path inside its hierarchy. */
    private readonly v1Paths: Map<string, string>,
    private readonly unifiedPath: string | undefined,
    /** How this view reads a file (withContents: from what was read already). */
    private readonly readFile: (file: string) => string | undefined = readText,
  ) {}

  /** The same cgroup, answering reads of the files in `contents` from it (read elsewhere already); itself without any. */
  withContents(contents: ReadonlyMap<string, string | undefined> | undefined): ContainerCgroup {
    if (!contents) return this;
    return new ContainerCgroup(this.host, this.v1Paths, this.unifiedPath, (file) => (contents.has(file) ? contents.get(file) : readText(file)));
  }

  /** The files `use` reads of this cgroup, found without reading any (each read answers nothing). */
  filesRead(use: (cgroup: ContainerCgroup) => void): string[] {
    const files: string[] = [];
    use(new ContainerCgroup(this.host, this.v1Paths, this.unifiedPath, (file) => {
      files.push(file);
      return undefined;
    }));
    return files;
  }

  /** From `/proc/<pid>/cgroup` of the container's init. */
  static ofProcess(host: CgroupHost, pid: number): ContainerCgroup | undefined {
    const text = readText(`/proc/${pid}/cgroup`);
    if (!text) return undefined;
    const v1 = new Map<string, string>();
    let unified: string | undefined;
    for (const line of text.split('\n')) {
      const first = line.indexOf(':');
      const second = line.indexOf(':', first + 1);
      if (first < 0 || second < 0) continue;
      const controllers = line.slice(first + 1, second);
      const where = payloadPath(line.slice(second + 1));
      if (controllers === '') unified = where;
      else for (const c of controllers.split(',')) v1.set(c, where);
    }
    return new ContainerCgroup(host, v1, unified);
  }

  /** Whether this looks like a liblxc payload cgroup at all. */
  get isPayload(): boolean {
    return [...this.v1Paths.values(), this.unifiedPath ?? ''].some((p) => p.split('/').some((s) => s.startsWith('lxc.payload.')));
  }

  file(controller: string, v1Name: string, v2Name: string): CgroupFile | undefined {
    const v1Mount = this.host.v1.get(controller);
    const v1Path = this.v1Paths.get(controller);
    if (v1Mount && v1Path !== undefined) return { version: 1, path: path.join(v1Mount, v1Path, v1Name) };
    if (this.host.unifiedMount && this.unifiedPath !== undefined && (this.host.unifiedControllers.has(controller) || controller === 'cgroup')) {
      return { version: 2, path: path.join(this.host.unifiedMount, this.unifiedPath, v2Name) };
    }
    return undefined;
  }

  read(controller: string, v1Name: string, v2Name: string): string | undefined {
    const f = this.file(controller, v1Name, v2Name);
    return f ? this.readFile(f.path)?.trim() : undefined;
  }

  /** A file found with file(), as it reads (untrimmed). */
  text(f: CgroupFile): string | undefined {
    return this.readFile(f.path);
  }

  number(controller: string, v1Name: string, v2Name: string): number | undefined {
    const f = this.file(controller, v1Name, v2Name);
    return f ? asNumber(this.readFile(f.path)) : undefined;
  }

  /** Write a value; the kernel's refusal (EBUSY, EINVAL...) is thrown as is. */
  write(controller: string, v1Name: string, v2Name: string, value: string): CgroupFile {
    const f = this.file(controller, v1Name, v2Name);
    if (!f) throw new Error(`the ${controller} cgroup controller is not available`);
    writeFileSync(f.path, value);
    return f;
  }

  /** The parent cgroup's file (what a lifted cpuset goes back to). */
  parentFile(controller: string, v1Name: string, v2Name: string): string | undefined {
    const f = this.file(controller, v1Name, v2Name);
    return f ? path.join(path.dirname(path.dirname(f.path)), path.basename(f.path)) : undefined;
  }

  /** Frozen by the freezer (v1 `freezer.state`, v2 `cgroup.freeze`). */
  frozen(): boolean {
    const v1 = this.file('freezer', 'freezer.state', 'cgroup.freeze');
    if (v1?.version === 1) return this.readFile(v1.path)?.trim() === 'FROZEN';
    const v2 = this.file('cgroup', 'cgroup.freeze', 'cgroup.freeze');
    return v2 ? this.readFile(v2.path)?.trim() === '1' : false;
  }
}
