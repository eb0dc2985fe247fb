/** GET /1.0/instances (list), POST (create), PUT (state of all instances at once). */
import path from 'node:path';
import {
  async, badRequest, collection, notFound, type ApiRequest, type Operation, type PluginContext, type RouteDescriptor,
  type ImageRecord, type InstanceType, type VolumeSource,
} from '../../../sdk/index.js';
import type { InstanceManager, CreateSpec } from '../manager.js';
import type { PowerControl, PowerAction } from '../power.js';
import { checkInstanceName, randomInstanceName } from '../names.js';
import { instanceTypeLimits } from '../instance-types.js';
import { bulkStateBody, deviceMap, instanceCreateBody, optionalBool, optionalString, profileList, stringMap } from '../shape.js';
import { fullView, instanceView, prefetchChildren, stateView, UNREACHABLE_STATE, type PrefetchedChildren } from '../render.js';
import { remoteRuntime, runtimeKey } from '../cluster-runtime.js';
import { isHere, remoteLocation } from '../location.js';
import { askMemberToChange, changeHeldInstances } from '../cluster-bulk-state.js';
import { vettedTarget } from '../placement.js';
import { copyFromMember, refreshOnMember } from '../cluster-copy.js';
import { collectionPath, instancePaths, operationResources, routeType } from './paths.js';
import { acceptBackupUploads } from '../backups/instance-post.js';
import { stateBody } from './state.js';
import type { InstanceHandle } from '../access.js';
import type { SnapshotManager } from '../snapshots/manager.js';
import { watchCopyProgress } from '../copy-progress.js';
import { withUnpackProgress } from '../unpack-progress.js';
import { migrationTargetOperation } from '../migration/target.js';
import { applyCopyOrigin, copyOrigin, refreshCopy, type CopyOrigin } from '../copy.js';

const TYPES: InstanceType[] = ['container', 'virtual-machine'];

/** What a bulk state change is called in its operation (spelled out: "stop" does not take "-ing" plainly). */
const BULK_DESCRIPTIONS: Record<string, string> = {
  start: 'Starting instances', stop: 'Stopping instances', restart: 'Restarting instances', freeze: 'Freezing instances', unfreeze: 'Unfreezing instances',
};

export function collectionRoutes(ctx: PluginContext, manager: InstanceManager, power: PowerControl, snapshots: SnapshotManager): RouteDescriptor {
  return {
    ...instancePaths(),
    get: {
      conventions: ['recursion', 'filter', 'all-projects'],
      // The names are records; a view or a filter shows the status too, which the drivers' revisions follow.
      // recursion=2 shows live figures (memory, network counters): made every time.
      reuse: (req) => (req.recursion === 0 && !req.query.filter ? '' : req.recursion === 2 ? undefined : manager.statusRevision()),
      handler: async (req) => {
        const type = routeType(req);
        const prefix = collectionPath(req);
        const project = req.allProjects ? undefined : req.project;
        // In a cluster, other members' instances run there: one question per member, all at once, begun
        // while the records are still being read (cluster-runtime.ts).
        const runtimeOf = ctx.cluster.enabled && req.recursion > 0 ? remoteRuntime(ctx, project, req.recursion === 2) : undefined;
        const stored = (await manager.index.list(project)).filter((s) => !type || s.doc.type === type);
        // Asked once before the views here: the kept views of stopped instances are then taken without waiting.
        const children = req.recursion === 2 && !ctx.cluster.enabled && stored.length > 0 ? await prefetchChildren(manager, project) : undefined;
        let prefetched: Promise<PrefetchedChildren> | undefined = children && Promise.resolve(children);
        const remote = runtimeOf?.(stored);
        return collection(stored, (s) => {
          const url = `${prefix}/${encodeURIComponent(s.name)}`;
          return s.project === 'default' ? url : `${url}?project=${encodeURIComponent(s.project)}`;
        }, (s, recursion) => (recursion === 1 && !ctx.cluster.enabled && manager.views.viewNow(s, instanceView))
          || (children && manager.views.fullNow(s, children)) || render(s, recursion));
        async function render(s: (typeof stored)[number], recursion: 1 | 2) {
          const elsewhere = remote !== undefined && remoteLocation(ctx.cluster, s.doc) !== undefined;
          const handle = ctx.cluster.enabled ? await manager.handleFor(s, { elsewhere }) : await manager.readHandle(s);
          const told = elsewhere ? (await remote).get(runtimeKey(s.project, s.name)) : undefined;
          if (recursion === 2) {
            const state = elsewhere ? (told?.state as Awaited<ReturnType<typeof stateView>> | undefined) ?? UNREACHABLE_STATE : undefined;
            const children = await (prefetched ??= prefetchChildren(manager, project));
            if (ctx.cluster.enabled) return fullView(handle, manager, children, state);
            return manager.views.full(s, handle, children, () => fullView(handle, manager, children));
          }
          if (elsewhere) return instanceView(handle, told?.status ?? 'Error');
          return manager.views.view(s, handle, await handle.driver.status(handle.inst).catch(() => 'Error' as const), instanceView);
        }
      },
    },
    post: acceptBackupUploads(ctx, manager, {
      body: instanceCreateBody,
      answers: ['operation'],
      // 404: the source image or instance does not exist.
      errors: [404, 409],
      handler: async (req) => async(await createOperation(ctx, manager, snapshots, req)),
    }),
    put: {
      description: 'Change the state of every instance of the project',
      answers: ['operation'],
      body: bulkStateBody,
      handler: async (req) => {
        const { action, opts } = stateBody(req.body?.state);
        const all = await manager.index.list(req.project);
        // In a cluster, each member changes the instances it holds: this one its own, the others when asked.
        const stored = ctx.cluster.enabled ? all.filter((s) => isHere(ctx.cluster, s.doc)) : all;
        const others = [...new Set(all.map((s) => remoteLocation(ctx.cluster, s.doc)).filter((m): m is string => m !== undefined))];
        const op = ctx.operations.create({
          class: 'task',
          description: BULK_DESCRIPTIONS[action] ?? 'Changing the state of instances',
          project: req.project,
          requestor: req.requestor,
          resources: { instances: all.map((s) => `/1.0/instances/${s.name}`) },
          run: async (control) => {
            const failures = await Promise.all([
              changeHeldInstances(manager, power, req, action, opts, stored),
              ...others.map((member) => askMemberToChange(ctx, member, req, control.signal).then(() => [], (err: Error) => [err.message])),
            ]);
            if (failures.flat().length) throw new Error(failures.flat().join('; '));
          },
        });
        return async(op);
      },
    },
  };
}


/** The directory the new instance's volume goes into (for progress). */
async function poolDir(manager: InstanceManager, pool: string, spec: CreateSpec): Promise<string> {
  return path.dirname(await manager.deps.storage.volumePath(pool, { type: spec.type, project: spec.project, name: spec.name }));
}

function refreshOperation(ctx: PluginContext, manager: InstanceManager, snapshots: SnapshotManager, req: ApiRequest, origin: CopyOrigin, target: InstanceHandle): Operation {
  return ctx.operations.create({
    class: 'task',
    description: 'Refreshing instance',
    project: req.project,
    requestor: req.requestor,
    resources: operationResources(target.name),
    run: (op) => manager.lock.run(`${target.project}/${target.name}`, async () => {
      const stopProgress = await watchCopyProgress(op, path.dirname(target.inst.volumePath));
      try {
        await refreshCopy(manager, snapshots, origin, await manager.load(target.project, target.name), req);
      } finally {
        stopProgress();
      }
    }),
  });
}

async function createOperation(ctx: PluginContext, manager: InstanceManager, snapshots: SnapshotManager, req: ApiRequest): Promise<Operation> {
  // The route's shape made sure this is a JSON object.
  const body = req.body as Record<string, any>;
  // No name, or an empty one (what `lxc init` sends when given none), gets a generated one.
  const name = checkInstanceName(body.name || randomInstanceName());
  // The body's type wins over the collection's, which only fills it in when absent, as the reference does.
  const type = (optionalString(body.type, 'type') || routeType(req) || 'container') as InstanceType;
  if (!TYPES.includes(type)) throw badRequest(`Invalid instance type "${type}"`);
  const source = body.source ?? { type: 'none' };
  if (typeof source !== 'object' || Array.isArray(source)) throw badRequest('"source" must be an object');

  let config = stringMap(body.config, 'config');
  if (body.instance_type) config = { ...instanceTypeLimits(String(body.instance_type)), ...config };
  const spec: CreateSpec = {
    project: req.project,
    name,
    type,
    architecture: optionalString(body.architecture, 'architecture') || 'x86_64',
    config,
    devices: deviceMap(body.devices),
    profiles: profileList(body.profiles) ?? ['default'],
    ephemeral: optionalBool(body.ephemeral, 'ephemeral') ?? false,
    description: optionalString(body.description, 'description') ?? '',
    source: { kind: 'empty' },
    origin: 'create',
    extraConfig: {},
  };
  if (source.type === 'migration') return migrationTargetOperation(ctx, manager, snapshots, req, spec, source);
  if (ctx.cluster.enabled && source.type === 'copy' && source.refresh === true) {
    const copyHolder = remoteLocation(ctx.cluster, (await manager.records.get(req.project, name))?.doc);
    if (copyHolder) return refreshOnMember(ctx, req, copyHolder, name);
  }
  if (ctx.cluster.enabled && source.type === 'copy' && typeof source.source === 'string') {
    const from = await manager.records.get(typeof source.project === 'string' && source.project ? source.project : req.project, source.source.split('/')[0]);
    const holder = remoteLocation(ctx.cluster, from?.doc);
    if (holder) return copyFromMember(ctx, manager, snapshots, req, spec, source, holder);
  }
  const filled = await fillSource(manager, snapshots, req, spec, source);
  const remoteImage = filled && 'remoteImage' in filled ? filled.remoteImage : undefined;
  const origin = filled && 'remoteImage' in filled ? undefined : filled;
  if (origin?.refresh) {
    const target = await manager.load(req.project, name).catch(() => undefined);
    if (target) return refreshOperation(ctx, manager, snapshots, req, origin, target);
  }
  const checked = await manager.check(req.project, spec.type, spec, { action: origin ? 'copy' : 'create', name, target: vettedTarget(ctx, req) });
  const release = await manager.reserve(req.project, name);
  try {
    return ctx.operations.create({
      class: 'task',
      description: 'Creating instance',
      project: req.project,
      requestor: req.requestor,
      resources: operationResources(name),
      run: async (op) => {
        let stopProgress = () => {};
        try {
          if (remoteImage) await applyImage(manager, req, spec, await manager.deps.images.pullCached(req, remoteImage, op));
          if (spec.source.kind === 'copy') stopProgress = await watchCopyProgress(op, await poolDir(manager, checked.pool, spec));
          spec.source = withUnpackProgress(op, spec.source);
          await manager.create(spec, checked.pool, req);
        } finally {
          stopProgress();
          release();
        }
      },
    });
  } catch (err) {
    release();
    throw err;
  }
}

/** An image's files, architecture, profiles and properties become the new instance's. */
async function applyImage(manager: InstanceManager, req: ApiRequest, spec: CreateSpec, image: ImageRecord): Promise<void> {
  const images = manager.deps.images;
  // The reference refuses the mismatch too (400): a container's rootfs cannot boot as a VM's disk, nor the reverse.
  if (image.type !== spec.type) {
    throw badRequest(`The image is a ${image.type} image and cannot make a ${spec.type} instance${image.type === 'virtual-machine' ? ' (use --vm)' : ''}`);
  }
  spec.source = { kind: 'image', fingerprint: image.fingerprint, project: req.project, unpack: (dir, onProgress) => images.unpack(image.fingerprint, dir, onProgress) };
  spec.architecture = image.architecture || spec.architecture;
  // A request naming no profiles (absent or null, not an empty list) takes the image's (image_profiles).
  if (req.body.profiles === undefined || req.body.profiles === null) spec.profiles = [...image.profiles];
  for (const [k, v] of Object.entries(image.properties)) spec.extraConfig[`image.${k}`] = v;
  spec.extraConfig['volatile.base_image'] = image.fingerprint;
  spec.origin = 'create';
  await images.markUsed(req.project, image.fingerprint).catch(() => {});
}

/** An image another server holds, fetched when the operation runs. */
interface RemoteImage {
  remoteImage: Record<string, any>;
}

/** Turn the `source` of a create request into a volume source and the keys it brings. */
async function fillSource(manager: InstanceManager, snapshots: SnapshotManager, req: ApiRequest, spec: CreateSpec, source: Record<string, any>): Promise<CopyOrigin | RemoteImage | undefined> {
  switch (source.type ?? 'none') {
    case 'none':
      // The reference records the trigger for an empty instance too; with no metadata.yaml the start renders nothing.
      spec.origin = 'create';
      return undefined;
    case 'image': {
      const images = manager.deps.images;
      if (images.isRemote(source)) {
        images.checkRemote(source);
        // Fetched in the operation (it may take minutes), as the reference does; applied then.
        spec.origin = 'create';
        return { remoteImage: source };
      }
      if (source.mode && source.mode !== 'pull') throw badRequest(`Unknown image source mode "${source.mode}"`);
      if (!source.alias && !source.fingerprint) {
        throw badRequest(source.properties ? 'Selecting an image by properties is not supported; give an alias or a fingerprint' : 'The image source needs an "alias" or a "fingerprint"');
      }
      const image = await images.resolve(req.project, { alias: source.alias, fingerprint: source.fingerprint });
      await applyImage(manager, req, spec, image);
      return undefined;
    }
    case 'copy': {
      const origin = await copyOrigin(manager, snapshots, req, source);
      applyCopyOrigin(spec, origin, req.body);
      return origin;
    }
    default:
      throw badRequest(`Unknown source type "${source.type}"`);
  }
}
