/**
 * The pass that keeps `cluster.images_minimal_replica` copies of every image's files in a cluster. A new
 * image is copied at once when it is installed (ClusterImageFiles.replicate); this pass brings the count
 * back after a holder was removed or lost, and gives a member that joins later its copy when the setting
 * is -1 (every member). As the reference, it runs hourly; it also runs soon after the membership changes.
 *
 * One member runs it: the online member whose name sorts first. Every member sees the same published
 * membership, so they agree without a lock; while a change settles two members may both run a pass,
 * which is harmless (a member asked twice for the same image fetches it once).
 */
import type { PluginContext } from '../../sdk/index.js';
import type { ImageCatalog } from './catalog.js';
import type { ClusterImageFiles } from './cluster-files.js';
import type { ImageFiles } from './files.js';
import { scheduleHourMs } from './tasks.js';

/** Membership changes come in bursts (a join publishes several times): one pass once they settle. */
const SETTLE_MS = 2_000;
/**
 * A pass that left copies missing (a member could not take one yet, as while a demotion moves its
 * database member) tries again after 2 s, then 4, 8… up to a minute.
 */
const RETRY_FIRST_MS = 2_000;
const RETRY_MAX_MS = 60_000;
/** How many such retries before waiting for the next hour or membership change. */
const RETRIES = 8;

export class ImageReplicaPass {
  private readonly hourMs = scheduleHourMs();
  private hourly: NodeJS.Timeout | undefined;
  private soon: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private running: Promise<void> | undefined;
  private membership = '';
  private retries = 0;
  private stopped = false;

  constructor(
    private readonly ctx: PluginContext,
    private readonly catalog: ImageCatalog,
    private readonly files: ImageFiles,
    private readonly clusterFiles: ClusterImageFiles,
  ) {}

  start(): void {
    this.hourly = setInterval(() => this.runSoon(0), this.hourMs);
    this.hourly.unref();
    this.unsubscribe = this.ctx.cluster.onChange(() => {
      const now = this.onlineNames().join(',');
      if (now === this.membership) return;
      this.membership = now;
      this.retries = 0;
      this.runSoon(SETTLE_MS);
    });
    this.membership = this.onlineNames().join(',');
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.hourly);
    clearTimeout(this.soon);
    this.unsubscribe?.();
    await this.running?.catch(() => undefined);
  }

  private onlineNames(): string[] {
    return this.ctx.cluster.members().filter((m) => m.online).map((m) => m.name).sort();
  }

  /** Run a pass after `delayMs` (one pending at a time; a later request moves it). */
  private runSoon(delayMs: number): void {
    if (this.stopped) return;
    clearTimeout(this.soon);
    this.soon = setTimeout(() => {
      if (this.running) {
        this.runSoon(SETTLE_MS);
        return;
      }
      this.running = this.pass()
        .then((complete) => {
          if (complete) this.retries = 0;
          else if (this.retries < RETRIES) this.runSoon(Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** this.retries++));
        })
        .catch((err) => this.ctx.log.warn({ err }, 'the image replica pass failed'))
        .finally(() => { this.running = undefined; });
    }, delayMs);
    this.soon.unref();
  }

  /** One pass; answers false when some image still has too few copies that could have more. */
  async pass(): Promise<boolean> {
    const cluster = this.ctx.cluster;
    if (!cluster.enabled) return true;
    const online = this.onlineNames();
    if (online[0] !== cluster.serverName) return true;
    const wanted = this.clusterFiles.minimalReplica();
    // 1 (or 0) asks for no copy beyond the member that has the image.
    if (wanted >= 0 && wanted <= 1) return true;
    const fingerprints = new Set((await this.catalog.images.list()).map((r) => r.doc.fingerprint));
    if (!fingerprints.size) return true;

    // What each online member holds; a member that does not answer is neither holder nor target now.
    const holdings = new Map<string, Set<string>>();
    for (const member of online) {
      try {
        holdings.set(member, member === cluster.serverName ? await this.files.present() : await this.clusterFiles.heldBy(member));
      } catch (err) {
        this.ctx.log.warn({ err, member }, 'a cluster member did not say which image files it holds');
      }
    }
    let complete = holdings.size === online.length;
    const target = wanted < 0 ? online.length : Math.min(wanted, online.length);
    for (const fp of fingerprints) {
      const holders = [...holdings].filter(([, held]) => held.has(fp)).map(([member]) => member);
      // No online member has the files: nothing to copy from (the image comes back with its holder).
      if (!holders.length) continue;
      const lacking = [...holdings.keys()].filter((member) => !holders.includes(member));
      for (const member of lacking.slice(0, Math.max(0, target - holders.length))) {
        if (this.stopped) return true;
        if (!(await this.clusterFiles.askToHold(member, fp))) complete = false;
        else this.ctx.log.info({ fingerprint: fp, member }, 'an image copy was made to keep cluster.images_minimal_replica');
      }
    }
    return complete;
  }
}
