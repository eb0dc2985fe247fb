/**
 * Answers of host tools that depend only on their files (`qemu-system-x86_64 --version`, `btrfs version`,
 * `lxc-start --version` with liblxc beside it), kept in the data directory across restarts. Every boot
 * of the full set ran such probes one after another, ~60 ms of its way to a serving socket (QEMU's alone
 * ~46 ms). An answer is reused while each file it depends on has the same device, inode, size and change
 * and modification times: a package upgrade writes a new file (a new inode), and any rewrite in place
 * moves ctime. Only answers of successful runs are kept; a file that cannot be read makes no answer.
 */
import { readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import type { RunResult } from '../../sdk/index.js';

interface Kept {
  /** The files' identities when the answer was made. */
  files: string[];
  stdout: string;
  stderr: string;
}

/** What tells one version of a file from another; undefined when it is not there. */
function identity(file: string): string | undefined {
  try {
    const st = statSync(file, { bigint: true });
    return `${file} ${st.dev}:${st.ino} ${st.size} ${st.mtimeNs} ${st.ctimeNs}`;
  } catch {
    return undefined;
  }
}

export class RememberedAnswers {
  private kept: Map<string, Kept> | undefined;

  /** `file` undefined: answers are kept for this process only (a daemon without a data directory of its own). */
  constructor(private readonly file: string | undefined) {}

  /** The identities of `files` as they are now, or undefined when one is missing. */
  identities(files: string[]): string[] | undefined {
    const out: string[] = [];
    for (const file of files) {
      const id = identity(file);
      if (id === undefined) return undefined;
      out.push(id);
    }
    return out;
  }

  get(key: string, files: string[]): RunResult | undefined {
    const kept = this.load().get(key);
    if (!kept || kept.files.length !== files.length || kept.files.some((f, i) => f !== files[i])) return undefined;
    return { stdout: kept.stdout, stderr: kept.stderr, exitCode: 0 };
  }

  set(key: string, files: string[], result: RunResult): void {
    this.load().set(key, { files, stdout: result.stdout, stderr: result.stderr });
    if (!this.file) return;
    // Through a new name and a rename: a daemon killed mid-write leaves the old file or the new one.
    const temporary = `${this.file}.${process.pid}`;
    try {
      writeFileSync(temporary, JSON.stringify(Object.fromEntries(this.load())), { mode: 0o600 });
      renameSync(temporary, this.file);
    } catch {
      // Not kept across a restart: the next boot runs the tool again, nothing worse.
      rmSync(temporary, { force: true });
    }
  }

  private load(): Map<string, Kept> {
    if (this.kept) return this.kept;
    this.kept = new Map();
    if (!this.file) return this.kept;
    try {
      const parsed: unknown = JSON.parse(readFileSync(this.file, 'utf8'));
      if (parsed && typeof parsed === 'object') {
        for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
          const v = value as Partial<Kept> | null;
          if (v && Array.isArray(v.files) && v.files.every((f) => typeof f === 'string') && typeof v.stdout === 'string' && typeof v.stderr === 'string') {
            this.kept.set(key, { files: v.files, stdout: v.stdout, stderr: v.stderr });
          }
        }
      }
    } catch {
      // Missing or damaged: every answer is made again.
    }
    return this.kept;
  }
}
