/**
 * The minute tick: snapshots due under `snapshots.schedule` are taken, and expired snapshots are
 * removed, each batch as one operation so clients watching operations see the work. A minute
 * with nothing to do creates no operation. `@startup` schedules are served as each start begins.
 */
import { truthy, type PluginContext } from '../../../sdk/index.js';
import type { InstanceHandle } from '../access.js';
import type { InstanceManager } from '../manager.js';
import type { FamilyHooks } from '../hooks.js';
import type { SnapshotManager } from './manager.js';
import { hasExpiry } from './record.js';
import { parseSchedule } from '../../../sdk/lib/snapshots/schedule.js';
import { LoopSlices } from '../../../sdk/lib/loop-slices/index.js';

const MINUTE_MS = 60_000;

export class SnapshotScheduler {
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly ctx: PluginContext,
    private readonly manager: InstanceManager,
    private readonly snapshots: SnapshotManager,
    hooks: FamilyHooks,
  ) {
    hooks.starting.tapPromise('snapshots', (handle) => this.onStarting(handle));
  }

  start(): void {
    // Ticks land just after each minute boundary, as cron's do.
    const delay = MINUTE_MS - (Date.now() % MINUTE_MS) + 50;
    this.timer = setTimeout(() => {
      this.timer = setInterval(() => void this.tick(), MINUTE_MS);
      this.timer.unref();
      void this.tick();
    }, delay);
    this.timer.unref();
  }

  stop(): void {
    clearTimeout(this.timer);
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One pass; overlapping passes are skipped (a slow minute must not pile up work). */
  async tick(now = new Date()): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await this.takeDue(now);
      await this.removeExpired(now);
    } catch (err) {
      this.ctx.log.error({ err }, 'snapshot scheduler pass failed');
    } finally {
      this.running = false;
    }
  }

  private schedule(handle: InstanceHandle) {
    const value = handle.inst.config['snapshots.schedule'];
    if (!value) return undefined;
    try {
      // The aliases' minute and hour are spread by instance, as the reference spreads them.
      return parseSchedule(value, { allowStartup: true, subject: `${handle.project}/${handle.name}` });
    } catch {
      return undefined;
    }
  }

  private async takeDue(now: Date): Promise<void> {
    const due: InstanceHandle[] = [];
    // Every minute, over every instance: kept handles, and the loop given a turn now and then.
    const slices = new LoopSlices();
    for (const stored of await this.manager.localRecords()) {
      await slices.between();
      const handle = await this.manager.readHandle(stored);
      const schedule = this.schedule(handle);
      if (!schedule || !schedule.matches(now)) continue;
      if (!truthy(handle.inst.config['snapshots.schedule.stopped']) && (await handle.driver.status(handle.inst)) === 'Stopped') continue;
      if (!(await this.allowed(handle))) continue;
      due.push(handle);
    }
    if (due.length) await this.snapshotAll(due, 'Creating scheduled snapshots');
  }

  /** A schedule is no way around the project's `restricted.snapshots`: such instances are passed over. */
  private async allowed(handle: InstanceHandle): Promise<boolean> {
    try {
      await this.manager.vetChild('snapshot', handle);
      return true;
    } catch (err) {
      this.ctx.log.debug({ instance: handle.name, project: handle.project, reason: (err as Error).message }, 'scheduled snapshot not allowed');
      return false;
    }
  }

  private async snapshotAll(handles: InstanceHandle[], description: string): Promise<void> {
    const op = this.ctx.operations.create({
      class: 'task',
      description,
      resources: { instances: handles.map((h) => `/1.0/instances/${h.name}`) },
      run: async () => {
        const failures: string[] = [];
        await Promise.all(handles.map((h) => this.manager.lock.run(`${h.project}/${h.name}`, async () => {
          const fresh = await this.manager.load(h.project, h.name);
          await this.snapshots.create(fresh, {});
        }).catch((err: Error) => failures.push(`${h.name}: ${err.message}`))));
        if (failures.length) throw new Error(`Scheduled snapshots failed: ${failures.join('; ')}`);
      },
    });
    await op.done().catch(() => {});
  }

  private async removeExpired(now: Date): Promise<void> {
    const expired = (await this.snapshots.records.list()).filter((s) => hasExpiry(s.doc.expires_at) && Date.parse(s.doc.expires_at) <= now.getTime());
    if (!expired.length) return;
    const op = this.ctx.operations.create({
      class: 'task',
      description: 'Cleaning up expired instance snapshots',
      run: async () => {
        for (const s of expired) {
          const instance = s.name.slice(0, s.name.indexOf('/'));
          await this.manager.lock.run(`${s.project}/${instance}`, async () => {
            const handle = await this.manager.load(s.project, instance).catch(() => undefined);
            // In a cluster, the member holding the instance removes its snapshots.
            if (handle && (await this.manager.holds(s.project, instance))) await this.snapshots.remove(handle, s.doc.name).catch((err) => this.ctx.log.warn({ err, snapshot: s.name }, 'expired snapshot removal failed'));
          });
        }
      },
    });
    await op.done().catch(() => {});
  }

  /**
   * `@startup`: a snapshot each time the instance starts, taken as the start begins (the instance
   * is still stopped, its files at rest) and within the start, so that it exists when `lxc start`
   * returns; a snapshot that fails fails the start. This is the reference's order.
   */
  private async onStarting(handle: InstanceHandle): Promise<void> {
    if (!this.schedule(handle)?.onStartup) return;
    if (!(await this.allowed(handle))) return;
    await this.snapshots.create(handle, {});
  }
}
