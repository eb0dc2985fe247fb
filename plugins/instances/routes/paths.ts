/**
 * Every instance route is served under /1.0/instances and the per-type collections, which fix the
 * instance type (`req.fixed.type`): /1.0/containers serves containers only, /1.0/virtual-machines VMs only.
 */
import { resourceUrl, type ApiRequest, type InstanceType, type RouteDescriptor } from '../../../sdk/index.js';

const ANY = '/1.0/instances';
const BY_TYPE: Record<InstanceType, string> = { container: '/1.0/containers', 'virtual-machine': '/1.0/virtual-machines' };

/** `suffix` is appended to each collection: `/{name}/state` -> /1.0/instances/{name}/state + the typed aliases. */
export function instancePaths(suffix = ''): Pick<RouteDescriptor, 'path' | 'aliases'> {
  return {
    path: `${ANY}${suffix}`,
    aliases: (Object.keys(BY_TYPE) as InstanceType[]).map((type) => ({ path: `${BY_TYPE[type]}${suffix}`, fixed: { type } })),
  };
}

/** The instance type the request's route is limited to; undefined under /1.0/instances. */
export const routeType = (req: ApiRequest): InstanceType | undefined => req.fixed.type as InstanceType | undefined;

/** The collection a listing through the request's route names its members under (each collection lists its own URLs). */
export const collectionPath = (req: ApiRequest): string => {
  const type = routeType(req);
  return type ? BY_TYPE[type] : ANY;
};

/** The `resources` of an operation about one instance, under both collection names. */
export const operationResources = (name: string) => ({ instances: [`/1.0/instances/${name}`], containers: [`/1.0/containers/${name}`] });

/** Path of something under an instance: /1.0/instances whatever collection the request came by, as the reference names them. */
export const subresourcePath = (name: string, suffix: string): string => `${ANY}/${encodeURIComponent(name)}/${suffix}`;

/** The same, with the request's project. */
export function subresourceUrl(req: ApiRequest, name: string, suffix: string): string {
  return resourceUrl(subresourcePath(name, suffix), req.project);
}
