/**
 * metrics: GET /1.0/metrics, the running instances' figures (and a few daemon figures) in the
 * text exposition Prometheus scrapes, reachable by trusted clients and `metrics` certificates.
 */
import { definePlugin, InstancesServiceRef, raw, type ApiRequest, type InstancesService, type PluginContext } from '../../sdk/index.js';
import { renderExposition } from './exposition.js';
import { daemonFamilies, instanceFamilies } from './families.js';
import { OperationsCount } from './operations-count.js';
import { ScrapeCache } from './scrape-cache.js';

const METRICS_PATH = '/1.0/metrics';

/** The reference sends a bare text/plain (no version parameter); Prometheus then reads the classic text format. */
const CONTENT_TYPE = 'text/plain';

/** Which projects an answer covers: one named by `project`, else all (a restricted client's own only). */
function selection(req: ApiRequest): { project?: string; only?: ReadonlySet<string> } {
  const project = req.allProjects ? undefined : req.query.project || undefined;
  // The kernel has already refused a `project` outside a restricted client's list.
  if (project === undefined && req.restrictedTo) return { only: new Set(req.restrictedTo) };
  return { project };
}

async function scrape(req: ApiRequest, cache: ScrapeCache, ops: OperationsCount, started: number): Promise<string> {
  const { project, only } = selection(req);
  let entries = await cache.get(project);
  if (only) entries = entries.filter((e) => only.has(e.project));
  const families = instanceFamilies(entries);
  // Daemon figures are server-wide: only an unfiltered answer to an unrestricted client carries them.
  if (project === undefined && !only) families.push(...daemonFamilies({ runningOperations: ops.running, uptimeSeconds: Math.floor((Date.now() - started) / 1000) }));
  return renderExposition(families);
}

function needInstances(ctx: PluginContext): InstancesService {
  const instances = ctx.services.get(InstancesServiceRef);
  if (!instances) throw new Error('the metrics plugin needs the "instances" service');
  return instances;
}

export default definePlugin({
  register(ctx) {
    const started = Date.now();
    const instances = needInstances(ctx);
    const cache = new ScrapeCache((project) => instances.metrics(project));
    const ops = new OperationsCount(ctx.events);
    ctx.events.subscribe((event) => {
      const action = (event.metadata as { action?: string }).action ?? '';
      if (action.startsWith('instance-')) cache.clear();
    }, ['lifecycle']);

    // The reference's second listener: /1.0/metrics (and the server's root) only, same certificates.
    const listener = ctx.listeners.forPaths([METRICS_PATH]);
    ctx.keys.register({
      key: 'core.metrics_address',
      member: true,
      scope: 'server',
      type: 'address',
      live: true,
      extension: 'metrics',
      validate: (value) => listener.validate(value),
      doc: 'Address to bind for the metrics-only HTTPS listener; unset disables it',
      apply: (value) => listener.apply(value),
    });

    ctx.routes.add({
      path: METRICS_PATH,
      extension: 'metrics',
      get: {
        access: 'metrics',
        description: 'Metrics of running instances in the Prometheus text exposition',
        answers: ['raw'],
        conventions: ['all-projects'],
        handler: async (req) => raw(await scrape(req, cache, ops, started), CONTENT_TYPE),
      },
    });
  },
});
