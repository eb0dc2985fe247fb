/**
 * The images plugin's own schedule, as the reference keeps it: every hour, images with
 * `auto_update` are refreshed from their source in each project whose
 * `images.auto_update_interval` (hours; the project's key over the server's; 0 or less: never)
 * divides the hours since the daemon started; at start and then every 24 hours, cached images
 * unused for `images.remote_cache_expiry` days are removed. One pass at a time, each pass a task
 * operation (only when there is work, so idle hours leave no trace); stopping aborts the pass and
 * waits for it.
 *
 * CORRAL_IMAGES_HOUR_MS sets the length of this schedule's hour (and so of its day) in
 * milliseconds, for tests that cannot wait hours: the same code runs, on a shorter clock.
 */
import type { KeyedLock, OperationControl, PluginContext } from '../../sdk/index.js';
import type { ImageCatalog } from './catalog.js';
import type { ImageFiles } from './files.js';
import { imageUrl, type StoredImage } from './image.js';
import { projectInteger } from './keys.js';
import { imageLifecycle } from './lifecycle.js';
import { refreshable, type ImageRefresher } from './refresh.js';
import { removeImage } from './remove.js';
import { NEVER_USED } from './times.js';

const HOUR_MS = 3_600_000;
const HOURS_PER_DAY = 24;
/** How long a stop waits for a pass to wind down after aborting it. */
const STOP_WAIT_MS = 30_000;

export function scheduleHourMs(): number {
  const scaled = Number(process.env.CORRAL_IMAGES_HOUR_MS);
  return Number.isFinite(scaled) && scaled > 0 ? scaled : HOUR_MS;
}

interface Held {
  project: string;
  doc: StoredImage;
}

export class ImageTasks {
  private readonly hourMs = scheduleHourMs();
  private startedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private pass: Promise<void> | undefined;
  private stopped = false;
  private readonly abort = new AbortController();

  constructor(
    private readonly ctx: PluginContext,
    private readonly catalog: ImageCatalog,
    private readonly files: ImageFiles,
    private readonly lock: KeyedLock,
    private readonly refresher: ImageRefresher,
  ) {}

  /** The first pass (hour 0: prune and update) runs at once, in the background. */
  start(): void {
    this.startedAt = Date.now();
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.abort.abort();
    if (this.pass) await Promise.race([this.pass, new Promise((resolve) => setTimeout(resolve, STOP_WAIT_MS).unref())]);
  }

  private schedule(hour: number): void {
    if (this.stopped) return;
    const delay = Math.max(0, this.startedAt + hour * this.hourMs - Date.now());
    this.timer = setTimeout(() => {
      this.pass = this.run(hour).finally(() => {
        this.pass = undefined;
        // A pass that overran skips the hours it covered rather than piling up.
        this.schedule(Math.max(hour + 1, Math.floor((Date.now() - this.startedAt) / this.hourMs) + 1));
      });
    }, delay);
    this.timer.unref();
  }

  private async run(hour: number): Promise<void> {
    try {
      if (hour % HOURS_PER_DAY === 0) await this.pruneExpired();
      await this.autoUpdate(hour);
    } catch (err) {
      this.ctx.log.error({ err }, 'image task pass failed');
    }
  }

  private async held(): Promise<Held[]> {
    return (await this.catalog.images.list()).map((r) => ({ project: r.project, doc: r.doc }));
  }

  /** Images due for an update this hour, by their project's interval. */
  async autoUpdate(hour: number): Promise<void> {
    const interval = new Map<string, number>();
    const due: Held[] = [];
    for (const image of await this.held()) {
      if (!image.doc.auto_update || !refreshable(image.doc)) continue;
      if (!interval.has(image.project)) interval.set(image.project, await projectInteger(this.ctx, image.project, 'images.auto_update_interval'));
      const every = interval.get(image.project)!;
      if (every > 0 && hour % every === 0) due.push(image);
    }
    if (!due.length || this.stopped) return;
    await this.inOperation('Updating images', async (op) => {
      for (const { project, doc } of due) {
        if (op.signal.aborted) return;
        await this.refresher.refresh({ project }, project, doc, op).catch((err: Error) => {
          this.ctx.log.warn({ err, project, fingerprint: doc.fingerprint }, 'image auto-update failed');
        });
      }
    });
  }

  /** Cached images whose last use (or arrival, if never used) is older than their project's expiry. */
  async pruneExpired(now = Date.now()): Promise<void> {
    const expiry = new Map<string, number>();
    const expired: Held[] = [];
    const dayMs = this.hourMs * HOURS_PER_DAY;
    for (const image of await this.held()) {
      if (!image.doc.cached) continue;
      if (!expiry.has(image.project)) expiry.set(image.project, await projectInteger(this.ctx, image.project, 'images.remote_cache_expiry'));
      const days = expiry.get(image.project)!;
      if (days <= 0) continue;
      const since = Date.parse(image.doc.last_used_at === NEVER_USED ? image.doc.uploaded_at : image.doc.last_used_at);
      if (Number.isFinite(since) && since + days * dayMs <= now) expired.push(image);
    }
    if (!expired.length || this.stopped) return;
    await this.inOperation('Cleaning up expired images', async (op) => {
      for (const { project, doc } of expired) {
        if (op.signal.aborted) return;
        try {
          await removeImage(this.ctx, this.catalog, this.files, this.lock, project, doc.fingerprint);
          imageLifecycle(this.ctx.events, { project }, 'image-deleted', (named) => imageUrl(named, doc.fingerprint));
        } catch (err) {
          this.ctx.log.warn({ err, project, fingerprint: doc.fingerprint }, 'removing an expired cached image failed');
        }
      }
    });
  }

  /**
   * Runs a pass as a task operation. Its signal also fires on stop(): the daemon's shutdown hooks run
   * before operations are cancelled, and a pass waiting on a silent server must not hold them up.
   */
  private async inOperation(description: string, run: (op: OperationControl) => Promise<void>): Promise<void> {
    const op = this.ctx.operations.create({
      class: 'task',
      description,
      run: async (control) => {
        await run({ id: control.id, signal: AbortSignal.any([control.signal, this.abort.signal]), updateMetadata: (patch) => control.updateMetadata(patch) });
      },
    });
    await op.done().catch((err) => this.ctx.log.warn({ err }, `${description} failed`));
  }
}
