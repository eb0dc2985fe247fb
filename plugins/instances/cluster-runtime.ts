/**
 * Listings in a cluster: the records are in the shared store, but whether an instance runs, and its
 * live state, only the member holding it knows. A listing asks each other member once, in parallel,
 * for the runtime of all its instances in the list (an internal route peers call with the cluster
 * certificate), starting before the records are read; a member that is offline or does not answer
 * in time has its instances shown with status "Error", never a hang. Runtime is always asked live.
 */
import Joi from 'joi';
import { badRequest, objectBody, sync, type DriverInstance, type InstanceStatus, type InstanceType, type PluginContext, type RouteDescriptor, type StoredDoc } from '../../sdk/index.js';
import type { InstanceManager } from './manager.js';
import type { PowerControl } from './power.js';
import type { InstanceRecord } from './record.js';
import { isHere, remoteLocation } from './location.js';
import { stateView } from './render.js';

export const RUNTIME_PATH = '/internal/cluster/instance-runtime';

/** A member that has not answered by then is shown as unreachable: a listing never waits longer. */
const ASK_TIMEOUT_MS = 5000;

export interface Runtime {
  status: InstanceStatus;
  /** The `state` object of recursion=2 (and of GET .../state), when asked for. */
  state?: Record<string, unknown>;
}

const key = (project: string, name: string) => `${project}/${name}`;

/** What a driver needs to tell an instance's status: who it is (see the route). */
const bareInstance = (project: string, name: string, type: InstanceType): DriverInstance => ({
  project, name, type, architecture: '', config: {}, devices: {}, volumePath: '', logDir: '',
});

/** What this member answers for its own instances. */
export function runtimeRoute(manager: InstanceManager, power: PowerControl, ctx: PluginContext): RouteDescriptor {
  return {
    path: RUNTIME_PATH,
    post: {
      access: 'admin',
      description: 'Cluster peers only: the status (and state) of instances this member holds',
      body: objectBody({
        instances: Joi.array().items(Joi.object({ project: Joi.string().required(), name: Joi.string().required(), type: Joi.string().valid('container', 'virtual-machine') })).max(100000).required(),
        state: Joi.boolean(),
      }),
      handler: async (req) => {
        const wanted = req.body.instances as { project: string; name: string; type?: InstanceType }[];
        if (!Array.isArray(wanted)) throw badRequest('"instances" must be a list');
        const out: Record<string, Runtime> = {};
        await Promise.all(wanted.map(async ({ project, name, type }) => {
          // The status alone: the drivers tell it from the instance's name (their runtime files), so the
          // store is not read at all; the asking member took the record's word that the instance is here.
          const driver = type && req.body.state !== true ? manager.deps.drivers.get(type) : undefined;
          if (driver) {
            out[key(project, name)] = { status: await driver.status(bareInstance(project, name, type!)).catch(() => 'Error' as const) };
            return;
          }
          const stored = await manager.records.get(project, name);
          if (!stored || !isHere(ctx.cluster, stored.doc)) return;
          const handle = await manager.handleFor(stored).catch(() => undefined);
          if (!handle) {
            out[key(project, name)] = { status: 'Error' };
            return;
          }
          if (req.body.state === true) {
            const state = await stateView(handle, manager.deps.storage).catch(() => undefined);
            out[key(project, name)] = state ? { status: state.status, state } : { status: 'Error' };
          } else {
            out[key(project, name)] = { status: await power.status(handle).catch(() => 'Error' as const) };
          }
        }));
        return sync(out);
      },
    },
  };
}

interface Wanted {
  project: string;
  name: string;
  type: InstanceType;
}

/** Ask `member` for the runtime of `instances`: a map by `project/name`, or undefined when it could not be asked. */
async function ask(ctx: PluginContext, member: string, instances: Wanted[], withState: boolean): Promise<Map<string, Runtime> | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ASK_TIMEOUT_MS)));
  try {
    const answer = await Promise.race([ctx.cluster.request(member, 'POST', RUNTIME_PATH, { instances, state: withState }), timeout]);
    if (!answer || answer.status !== 200) return undefined;
    // The peer answers with the API's envelope.
    const metadata = (answer.body?.metadata ?? answer.body ?? {}) as Record<string, Runtime>;
    return new Map(Object.entries(metadata));
  } catch (err) {
    ctx.log.debug({ err, member }, 'a member did not tell the runtime of its instances');
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What the last listing of each scope (a project, or every project) found on each other member. The
 * next listing of that scope asks those members at once, while its own read of the records is still
 * on its way (on etcd that read waits for a freshness check): the two round trips overlap instead of
 * adding up. Only whom to ask comes from here; which instances are listed, and where, comes from the
 * records read, and an instance the early question missed is asked about once they are known.
 */
const lastFound = new Map<string, Map<string, Wanted[]>>();
/** Scopes remembered at most: a listing of a new project past it forgets the others. */
const SCOPES_KEPT = 64;

const scopeKey = (project: string | undefined, withState: boolean) => `${withState ? 'state' : 'status'}\0${project ?? '*'}`;

/**
 * The runtime of a listing's instances held by other members, keyed `project/name`; instances of a
 * member that could not be asked are missing from the map (the caller shows them as "Error").
 * Start it before reading the records (`project` undefined: every project), then give it the records.
 */
export function remoteRuntime(ctx: PluginContext, project: string | undefined, withState: boolean): (stored: readonly StoredDoc<InstanceRecord>[]) => Promise<Map<string, Runtime>> {
  const scope = scopeKey(project, withState);
  const early = new Map<string, { asked: Set<string>; answer: Promise<Map<string, Runtime> | undefined> }>();
  for (const [member, instances] of lastFound.get(scope) ?? []) {
    if (!ctx.cluster.members().some((m) => m.name === member && m.online)) continue;
    early.set(member, { asked: new Set(instances.map((i) => key(i.project, i.name))), answer: ask(ctx, member, instances, withState) });
  }
  return async (stored) => {
    const byMember = new Map<string, Wanted[]>();
    for (const s of stored) {
      const member = remoteLocation(ctx.cluster, s.doc);
      if (member) byMember.set(member, [...(byMember.get(member) ?? []), { project: s.project, name: s.name, type: s.doc.type }]);
    }
    if (lastFound.size >= SCOPES_KEPT && !lastFound.has(scope)) lastFound.clear();
    lastFound.set(scope, byMember);
    const out = new Map<string, Runtime>();
    await Promise.all([...byMember].map(async ([member, instances]) => {
      const started = early.get(member);
      const answered = started ? await started.answer : undefined;
      // What the early question did not name (a new instance, one moved there) is asked now. A member that did
      // not answer it is not asked again: its instances show as unreachable, with no second wait.
      const missing = !started ? instances : answered ? instances.filter((i) => !started.asked.has(key(i.project, i.name))) : [];
      const late = missing.length ? await ask(ctx, member, missing, withState) : undefined;
      for (const i of instances) {
        const k = key(i.project, i.name);
        const runtime = late?.get(k) ?? (started?.asked.has(k) ? answered?.get(k) : undefined);
        if (runtime) out.set(k, runtime);
      }
    }));
    return out;
  };
}

export const runtimeKey = key;
