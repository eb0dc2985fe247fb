/**
 * Under a typed collection an instance of the other type does not exist: /1.0/virtual-machines/c1
 * answers 404 for the container c1 (and /1.0/containers/v1 for the VM v1) before any handler looks
 * at it, as the reference does, on every route below the instance (state, exec, files, snapshots...).
 */
import { notFound, type ApiRequest, type InstanceType, type RouteDescriptor, type VerbSpec } from '../../../sdk/index.js';
import { routeType } from './paths.js';

/** The type of the instance `name` in `project`, undefined when there is none. */
export type InstanceTypeLookup = (project: string, name: string) => Promise<InstanceType | undefined>;

const VERBS = ['get', 'put', 'patch', 'post', 'delete'] as const;

/** `route` with every handler (and `current`, and a websocket's `accept`) behind the check. */
export function guardRouteType(route: RouteDescriptor, typeOf: InstanceTypeLookup): RouteDescriptor {
  const check = async (req: ApiRequest): Promise<void> => {
    const wanted = routeType(req);
    // The collection itself has no instance in its path; /1.0/instances takes either type.
    if (!wanted || req.params.name === undefined) return;
    const actual = await typeOf(req.project, req.params.name);
    // A missing instance is the handler's to refuse, in its own words, as before.
    if (actual !== undefined && actual !== wanted) throw notFound('Instance not found');
  };
  const guarded: RouteDescriptor = { ...route };
  for (const verb of VERBS) {
    const spec: VerbSpec | undefined = route[verb];
    if (spec) guarded[verb] = { ...spec, handler: async (req) => (await check(req), spec.handler(req)) };
  }
  const current = route.current;
  if (current) guarded.current = async (req) => (await check(req), current(req));
  const websocket = route.websocket;
  if (websocket) guarded.websocket = { ...websocket, accept: async (req) => (await check(req), websocket.accept?.(req)) };
  return guarded;
}
