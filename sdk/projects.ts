/**
 * What the `projects` plugin offers the other families: which project holds a kind of resource for a
 * given project (the `features.*` switches), and the policy gate (restrictions and limits) every family
 * calls before it creates, changes, copies or moves something. Builds without the plugin have only the
 * `default` project and no gate: callers use `services.get(ProjectsServiceRef)?.…`.
 */
import { createServiceRef, type ServiceRegistry } from './services.js';
import type { ApiRequest, RouteDescriptor, VerbSpec } from './routes.js';
import type { DeviceConfig } from './device.js';
import type { InstanceType } from './instance-types.js';
import type { UsedByRegistry } from './used-by.js';

/** Resource kinds a project may keep apart from `default` (`features.<kind>`). */
export type ProjectFeature = 'images' | 'profiles' | 'storage.volumes' | 'networks';

export interface ProjectView {
  name: string;
  description: string;
  config: Record<string, string>;
}

/** An instance as it would be after the change, with profiles expanded. */
export interface InstanceProposal {
  kind: 'instance';
  action: 'create' | 'update' | 'copy' | 'move' | 'import';
  project: string;
  name: string;
  type: InstanceType;
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
  /** The instance's name before the change when it already exists in this project (update, rename). */
  replaces?: string;
  /** The cluster member the request names (`?target=`), checked against `restricted.cluster.target`. */
  target?: string;
}

export interface ProfileProposal {
  kind: 'profile';
  project: string;
  name: string;
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
}

export interface SnapshotProposal {
  kind: 'snapshot' | 'backup';
  project: string;
  instance: string;
}

export interface VolumeProposal {
  kind: 'volume';
  project: string;
  pool: string;
  name: string;
  /** Bytes the volume may grow to (its `size`), when known. */
  size?: number;
}

export type ProjectProposal = InstanceProposal | ProfileProposal | SnapshotProposal | VolumeProposal;

export interface ProjectsService {
  get(name: string): Promise<ProjectView | undefined>;
  /** The project whose resources of `feature`'s kind `project` uses: itself when the feature is on, else `default`. */
  featureProject(project: string, feature: ProjectFeature): Promise<string>;
  /**
   * Whether `project`'s restrictions let it see and use a network (`managed`: a managed network, not a
   * host interface). Networks it may not use are hidden from it, as if they did not exist.
   */
  networkAllowed(project: string, network: string, managed: boolean): Promise<boolean>;
  /** Throws an ApiError (400 naming the restriction or limit, 403 where the reference answers so) when refused. */
  vet(proposal: ProjectProposal): Promise<void>;
  /**
   * Families beyond instances, profiles and images (custom volumes, networks) add what lives in a
   * project, as URLs with `?project=` outside `default` (providers get the project name twice).
   * It shows in the project's `used_by`, keeps it from being renamed or deleted, and networks
   * (`/1.0/networks/...`) are counted in the project's `/state`.
   */
  readonly contents: UsedByRegistry;
}

export const ProjectsServiceRef = createServiceRef<ProjectsService>('projects');

/** The project holding `feature`'s resources for `project`; `project` itself in builds without the projects plugin. */
export async function featureProjectOf(services: ServiceRegistry, project: string, feature: ProjectFeature): Promise<string> {
  if (project === 'default') return project;
  const projects = services.get(ProjectsServiceRef);
  return projects ? projects.featureProject(project, feature) : project;
}

const requestedProjects = new WeakMap<ApiRequest, string>();

/**
 * The project the client named, before `featureScopedRoute` mapped it: its restrictions still apply
 * to what it is shown of the project it borrows from; operations answering the request belong to
 * it (the client waits for them on that project's event stream), and so do the images family's
 * lifecycle events, as with the reference.
 */
export function requestedProjectOf(req: ApiRequest): string {
  return requestedProjects.get(req) ?? req.project;
}

/**
 * A route whose handlers see `req.project` already mapped through `features.<feature>`: a project
 * without its own images (profiles...) reads and writes those of `default`, as if it had asked for it.
 */
export function featureScopedRoute(services: ServiceRegistry, feature: ProjectFeature, route: RouteDescriptor): RouteDescriptor {
  const scoped = async (req: ApiRequest): Promise<ApiRequest> => {
    const project = await featureProjectOf(services, req.project, feature);
    if (project === req.project) return req;
    // The mapped request keeps everything else of the original (body, trust, requestor) through its prototype.
    const mapped: ApiRequest = Object.create(req, { project: { value: project, enumerable: true } });
    requestedProjects.set(mapped, requestedProjectOf(req));
    return mapped;
  };
  const wrap = (spec: VerbSpec | undefined): VerbSpec | undefined => spec && { ...spec, handler: async (req) => spec.handler(await scoped(req)) };
  const current = route.current;
  return {
    ...route,
    get: wrap(route.get),
    put: wrap(route.put),
    patch: wrap(route.patch),
    post: wrap(route.post),
    delete: wrap(route.delete),
    current: current && (async (req) => current(await scoped(req))),
  };
}
