/** The daily task that removes stale instance log files, visible as an operation like the reference's. */
import type { PluginContext } from '../../sdk/index.js';
import { expireLogs } from './logs.js';

const DAY_MS = 24 * 3600_000;

export function scheduleLogExpiry(ctx: PluginContext, logsRoot: string): { stop(): void } {
  const run = () => {
    ctx.operations.create({
      class: 'task',
      description: 'Expiring log files',
      run: async () => {
        const removed = await expireLogs(logsRoot);
        if (removed) ctx.log.info({ removed }, 'expired instance log files');
      },
    });
  };
  run();
  const timer = setInterval(run, DAY_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
