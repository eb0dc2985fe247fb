/** The instances' share of GET /1.0/metrics: each running instance's driver reads its own figures. */
import type { InstanceMetricsEntry } from '../../sdk/index.js';
import type { InstanceManager } from './manager.js';

export async function collectMetrics(manager: InstanceManager, project?: string): Promise<InstanceMetricsEntry[]> {
  const stored = await manager.localRecords(project);
  const entries = await Promise.all(stored.map(async (s): Promise<InstanceMetricsEntry | undefined> => {
    const driver = manager.deps.drivers.get(s.doc.type);
    if (!driver?.metrics) return undefined;
    // An instance whose pool or profiles cannot be read still runs: leave it out rather than fail the scrape.
    const handle = await manager.handleFor(s).catch(() => undefined);
    const metrics = handle && (await driver.metrics(handle.inst).catch((err: Error) => {
      manager.log.debug({ err: err.message, instance: s.name, project: s.project }, 'metrics unreadable');
      return undefined;
    }));
    return metrics ? { project: s.project, name: s.name, type: s.doc.type, metrics } : undefined;
  }));
  return entries.filter((e): e is InstanceMetricsEntry => e !== undefined);
}
