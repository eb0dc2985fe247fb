/**
 * What plugins keeping an nftables table of their own share: the system's `nft`, a table name per
 * data directory (so a test daemon never touches the installed daemon's rules), and one batch at a
 * time through `nft -f -`, which applies a script whole or not at all.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { HostTools } from '../../host-tools.js';

/** The system's nft by its path: under npm, node_modules/.bin comes first on PATH and holds an unrelated `nft`. */
export const NFT_PATH = existsSync('/usr/sbin/nft') ? '/usr/sbin/nft' : 'nft';

const NFT_TIMEOUT_MS = 15_000;

/** `base` for the default data directory; any other (tests, a second daemon) gets `<base>_<hash of the directory>`. */
export function dataDirTableName(base: string, dataDir: string): string {
  const dir = path.resolve(dataDir);
  return dir === '/var/lib/corral' ? base : `${base}_${createHash('sha256').update(dir).digest('hex').slice(0, 8)}`;
}

/** One table of a family (`inet`, `bridge`, ...) whose batches run one after the other. */
export class NftTable {
  /** The table's name alone, as `nft list table <family> <name>` takes it. */
  readonly name: string;
  /** `<family> <name>`, as script lines name the table. */
  readonly ref: string;
  private queue: Promise<unknown> = Promise.resolve();
  /** Whether the table is there, as this daemon's own batches left it; undefined until known. */
  private present: boolean | undefined;

  constructor(protected readonly tools: HostTools, readonly family: string, base: string, dataDir: string) {
    this.name = dataDirTableName(base, dataDir);
    this.ref = `${family} ${this.name}`;
  }

  /** Runs `fn` once the previous one has settled: creating the table or reading it back must not race. */
  protected serial<R>(fn: () => Promise<R>): Promise<R> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Applies `script` as one atomic batch; a refusal is answered with nft's message, not thrown. */
  protected async batch(script: string): Promise<{ ok: boolean; stderr: string }> {
    const r = await this.tools.run(NFT_PATH, ['-f', '-'], { input: script, allowFailure: true, timeoutMs: NFT_TIMEOUT_MS });
    return { ok: r.exitCode === 0, stderr: r.stderr.trim() };
  }

  /**
   * Makes the table what `script` says, a script that drops the table and builds it again whole; `empty`
   * when it builds nothing. Emptying a table known to be absent runs nothing: at every boot with no rules
   * to keep, each such plugin ran an `nft -f -` (~15 ms here) to drop a table that was not there, where
   * one `nft list` (~5 ms) tells.
   */
  protected async replace(script: string, empty: boolean): Promise<{ ok: boolean; stderr: string }> {
    if (empty) {
      this.present ??= (await this.listJson('table', this.family, this.name)) !== undefined;
      if (!this.present) return { ok: true, stderr: '' };
    }
    const r = await this.batch(script);
    // A refused batch changed nothing (nft applies one whole or not at all).
    if (r.ok) this.present = !empty;
    return r;
  }

  /** `nft -j list <what...>` parsed, or undefined when nft refuses (the table or map is absent). */
  protected async listJson<T>(...what: string[]): Promise<T[] | undefined> {
    const r = await this.tools.run(NFT_PATH, ['-j', 'list', ...what], { allowFailure: true, timeoutMs: NFT_TIMEOUT_MS });
    if (r.exitCode !== 0) return undefined;
    return (JSON.parse(r.stdout) as { nftables: T[] }).nftables;
  }
}
