/**
 * /1.0/storage-pools/{pool}/volumes[/{type}[/{name}[/state]]]: volumes of every type, custom
 * volumes created, edited, renamed, copied and moved; instance and image volumes shown and their
 * description and config edited. Custom volumes live in the project that
 * `features.storage.volumes` names; instance volumes in their instance's project.
 */
import {
  async, badRequest, bodyObject, bodyShape, collection, describedConfigBody, empty, featureProjectOf, instanceUrl,
  isPlainObject, notFound, objectBody, optionalBool, optionalString, stringMap, sync, type ApiRequest,
  type ApiResponse, type InstanceSummary, type PluginContext, type RouteDescriptor, type VerbSpec,
  type VolumeRef, type VolumeType,
} from '../../../sdk/index.js';
import { acceptingBackupUploads } from '../../../sdk/lib/backup/index.js';
import type { PoolManager } from '../pools.js';
import type { VolumeManager } from '../volumes.js';
import { contentTypeOf, customRef, type CustomVolumes } from './custom-volumes.js';
import { checkVolumeName } from './names.js';
import { customView, editableView, NEVER, VOLUME_TYPES, volumeSnapshotUrl, volumeUrl, type VolumeView } from './record.js';
import type { VolumeUsers } from './users.js';
import { volumeTask } from './volume-task.js';
import { editInstanceVolume } from './instance-volume-edit.js';
import { volumeMigrationSource } from './migration/source.js';
import { volumeMigrationTarget } from './migration/target.js';

const BASE = '/1.0/storage-pools/{pool}/volumes';

/** Types in the order the reference lists them. */
const LIST_ORDER: VolumeType[] = ['container', 'custom', 'image', 'virtual-machine'];

export function volumeType(value: string | undefined): VolumeType {
  if (!VOLUME_TYPES.includes(value as VolumeType)) throw badRequest(`Invalid storage volume type "${value}"`);
  return value as VolumeType;
}

interface Listed {
  url: string;
  view: VolumeView;
}

export interface VolumeRouteDeps {
  ctx: PluginContext;
  pools: PoolManager;
  volumes: VolumeManager;
  custom: CustomVolumes;
  users: VolumeUsers;
  /** Snapshot and backup routes of custom volumes. */
  more?: RouteDescriptor[];
  /** POST /volumes/custom with a backup tarball (`Content-Type: application/octet-stream`). */
  importBackup?: (req: ApiRequest, pool: string, project: string) => Promise<ApiResponse>;
  /** PUT with `restore`: the volume takes a snapshot's content. */
  restore?: (pool: string, project: string, volume: string, snapshot: string, req: ApiRequest) => Promise<void>;
}

export function volumeRoutes(deps: VolumeRouteDeps): RouteDescriptor[] {
  const { ctx, pools, volumes, custom, users } = deps;
  const customProject = (req: ApiRequest) => featureProjectOf(ctx.services, req.project, 'storage.volumes');

  const instanceView = (inst: InstanceSummary, name: string, usedBy: string, state: { description: string; config: Record<string, string> }): VolumeView => ({
    config: state.config, description: state.description, name, type: inst.type, used_by: [usedBy], location: inst.location ?? 'none',
    content_type: inst.type === 'virtual-machine' ? 'block' : 'filesystem', project: inst.project, created_at: NEVER,
  });

  const imageView = (name: string, state: { description: string; config: Record<string, string> }): VolumeView => ({
    config: state.config, description: state.description, name, type: 'image', used_by: [`/1.0/images/${name}`], location: 'none',
    content_type: 'filesystem', project: 'default', created_at: NEVER,
  });
  const imageRef = (name: string): VolumeRef => ({ type: 'image', project: 'default', name });

  /** Everything of `type` on the pool that the request's project sees. */
  async function listType(pool: string, type: VolumeType, req: ApiRequest): Promise<Listed[]> {
    if (type === 'custom') {
      const project = await customProject(req);
      const entries = custom.catalog.list(pool, project);
      const usersOf = await users.customVolumeUsers([project]);
      const out: Listed[] = [];
      for (const e of entries) {
        out.push({ url: volumeUrl(pool, 'custom', e.doc.name, project), view: customView(e.doc, project, usersOf(project, pool, e.doc.name)) });
        for (const s of custom.catalog.snapshotsOf(project, pool, e.doc.name)) {
          out.push({
            url: volumeSnapshotUrl(pool, e.doc.name, s.doc.name, project),
            view: customView({ ...e.doc, name: `${e.doc.name}/${s.doc.name}`, description: s.doc.description, config: s.doc.config, createdAt: s.doc.createdAt }, project, []),
          });
        }
      }
      return out;
    }
    if (type === 'image') {
      const refs = (await volumes.listVolumes(pool, 'image')).filter((r) => !r.name.includes('.')).map((r) => imageRef(r.name));
      const states = await volumes.volumeStates(pool, 'image', refs);
      return refs.map((r, i) => ({ url: volumeUrl(pool, 'image', r.name, 'default'), view: imageView(r.name, states[i]!) }));
    }
    const out: Listed[] = [];
    const instances = (await users.instancesOnPool(pool, req.allProjects ? undefined : req.project)).filter((inst) => inst.type === type);
    const refs = instances.map((inst): VolumeRef => ({ type, project: inst.project, name: inst.name }));
    // A volume the batch cannot read takes none of the others down with it: each is read on its own then.
    const snapshots = await volumes.listSnapshotsOfMany(pool, type, refs)
      .catch(() => Promise.all(refs.map((ref) => volumes.listSnapshots(pool, ref).catch(() => [] as string[]))));
    const states = await volumes.volumeStates(pool, type, refs);
    for (const [i, inst] of instances.entries()) {
      const ref = refs[i]!;
      const state = states[i]!;
      out.push({ url: volumeUrl(pool, type, inst.name, inst.project), view: instanceView(inst, inst.name, instanceUrl(inst.project, inst.name), state) });
      for (const snap of snapshots[i]!) {
        const snapUser = instanceUrl(inst.project, inst.name).replace(/(\?|$)/, `/snapshots/${encodeURIComponent(snap)}$1`);
        out.push({
          url: volumeUrl(pool, type, inst.name, inst.project).replace(/(\?|$)/, `/snapshots/${encodeURIComponent(snap)}$1`),
          view: instanceView(inst, `${inst.name}/${snap}`, snapUser, state.snapshots[snap] ?? { description: '', config: {} }),
        });
      }
    }
    return out;
  }

  /** The create verb also takes backup tarballs when the backup part is wired in. */
  const withImport = (verb: VerbSpec): VerbSpec => (deps.importBackup
    ? acceptingBackupUploads(verb, async (req) => {
      onlyCustom(volumeType(req.params.type), 'imported');
      await pools.usable(req.params.pool!);
      return deps.importBackup!(req, req.params.pool!, await customProject(req));
    })
    : verb);

  const listing = (items: Listed[]): ApiResponse => collection(items, (i) => i.url, (i) => i.view);

  /** An instance or image volume: where its record lives, and how the API shows it. */
  async function findInstanceVolume(pool: string, type: VolumeType, name: string, req: ApiRequest): Promise<{ ref: VolumeRef; view: VolumeView }> {
    if (type === 'image') {
      const found = (await volumes.listVolumes(pool, 'image')).some((r) => r.name === name && !name.includes('.'));
      if (!found) throw notFound(`Storage volume "${name}" not found on pool "${pool}"`);
      return { ref: imageRef(name), view: imageView(name, await volumes.volumeState(pool, imageRef(name))) };
    }
    const inst = (await users.instancesOnPool(pool, req.project)).find((i) => i.type === type && i.name === name);
    if (!inst) throw notFound(`Storage volume "${name}" not found on pool "${pool}"`);
    const ref: VolumeRef = { type, project: inst.project, name: inst.name };
    return { ref, view: instanceView(inst, inst.name, instanceUrl(inst.project, inst.name), await volumes.volumeState(pool, ref)) };
  }

  const editable = (view: VolumeView) => ({ config: view.config, description: view.description });

  const onlyCustom = (type: VolumeType, doing: string) => {
    if (type !== 'custom') throw badRequest(`Only custom volumes can be ${doing} through this API`);
  };

  function editBody(req: ApiRequest): { description: string; config: Record<string, string>; restore?: string } {
    const body = bodyObject(req.body);
    return {
      description: optionalString(body.description, 'description') ?? '',
      config: stringMap(body.config, 'config'),
      restore: optionalString(body.restore, 'restore') || undefined,
    };
  }

  const routes: RouteDescriptor[] = [
    {
      path: BASE,
      extension: 'storage',
      get: {
        description: 'List the volumes of a storage pool',
        conventions: ['recursion', 'filter', 'all-projects'],
        // Records, and directories on the pool that only the daemon's own changes make or remove.
        reuse: true,
        handler: async (req) => {
          await pools.get(req.params.pool!);
          const all: Listed[] = [];
          for (const type of LIST_ORDER) all.push(...(await listType(req.params.pool!, type, req)));
          return listing(all);
        },
      },
    },
    {
      path: `${BASE}/{type}`,
      extension: 'storage',
      get: {
        description: 'List the volumes of one type on a storage pool',
        conventions: ['recursion', 'filter', 'all-projects'],
        // Records, and directories on the pool that only the daemon's own changes make or remove.
        reuse: true,
        handler: async (req) => {
          await pools.get(req.params.pool!);
          return listing(await listType(req.params.pool!, volumeType(req.params.type), req));
        },
      },
      post: withImport({
        description: 'Create a custom storage volume, possibly as a copy of another on this server or (migration) on another',
        errors: [409],
        // A copy or a backup upload is an operation; a new empty volume is answered at once.
        answers: ['sync', 'operation'],
        body: describedConfigBody({ name: bodyShape.text, type: bodyShape.text, content_type: bodyShape.text, source: bodyShape.object }),
        handler: async (req) => {
          const pool = req.params.pool!;
          onlyCustom(volumeType(req.params.type), 'created');
          await pools.usable(pool);
          const project = await customProject(req);
          const body = bodyObject(req.body);
          const name = checkVolumeName(body.name);
          const description = optionalString(body.description, 'description') ?? '';
          const config = stringMap(body.config, 'config');
          const source = isPlainObject(body.source) ? body.source : {};
          const sourceType = optionalString(source.type, 'source.type') ?? '';
          if (sourceType === '' || sourceType === 'none') {
            await custom.create(pool, project, { name, description, config, contentType: contentTypeOf(body.content_type) }, req.requestor);
            return sync({}, { location: volumeUrl(pool, 'custom', name, project) });
          }
          if (sourceType === 'migration') {
            // From another server: the client copied the source volume's config, description and content type.
            return async(await volumeMigrationTarget({ ctx, pools, volumes, custom }, req, {
              pool, project, source, volume: { name, description, config, contentType: contentTypeOf(body.content_type) },
            }));
          }
          if (sourceType !== 'copy') throw badRequest(`Volume source type "${sourceType}" is not supported`);
          const sourcePool = optionalString(source.pool, 'source.pool') || pool;
          const sourceName = optionalString(source.name, 'source.name') ?? '';
          if (!sourceName) throw badRequest('No source volume name provided');
          const sourceProject = optionalString(source.project, 'source.project')
            ? await featureProjectOf(ctx.services, String(source.project), 'storage.volumes')
            : project;
          const copySource = {
            pool: sourcePool, project: sourceProject, name: sourceName,
            volumeOnly: optionalBool(source.volume_only, 'source.volume_only') ?? false,
            refresh: optionalBool(source.refresh, 'source.refresh') ?? false,
          };
          // Checked before the operation starts so that bad input gets its 4xx at once.
          await pools.usable(sourcePool);
          custom.get(sourceProject, sourcePool, sourceName.split('/')[0]!);
          return volumeTask(ctx, req, { pool, project, name }, 'Copying storage volume', () =>
            custom.copy(pool, project, { name, description: body.description === undefined ? undefined : description, config }, copySource, req.requestor));
        },
      }),
    },
    {
      path: `${BASE}/{type}/{name}`,
      extension: 'storage',
      current: async (req) => {
        const type = volumeType(req.params.type);
        if (type !== 'custom') return editable((await findInstanceVolume(req.params.pool!, type, req.params.name!, req)).view);
        return editableView(custom.get(await customProject(req), req.params.pool!, req.params.name!).doc);
      },
      get: {
        description: 'Show a storage volume',
        handler: async (req) => {
          const pool = req.params.pool!;
          const type = volumeType(req.params.type);
          await pools.get(pool);
          if (type !== 'custom') {
            const { view } = await findInstanceVolume(pool, type, req.params.name!, req);
            return sync(view, { etag: editable(view) });
          }
          const project = await customProject(req);
          const entry = custom.get(project, pool, req.params.name!);
          return sync(customView(entry.doc, project, await users.usersOf(project, pool, entry.doc.name)), { etag: editableView(entry.doc) });
        },
      },
      put: {
        description: 'Replace the configuration of a volume, or restore one of a custom volume\'s snapshots',
        body: describedConfigBody({ restore: bodyShape.text }),
        handler: async (req) => {
          const type = volumeType(req.params.type);
          if (type !== 'custom') {
            const edit = editBody(req);
            if (edit.restore) throw badRequest(`Snapshots of ${type} volumes are restored through their ${type === 'image' ? 'image' : 'instance'}`);
            const { ref } = await findInstanceVolume(req.params.pool!, type, req.params.name!, req);
            await editInstanceVolume(ctx, volumes, req.params.pool!, ref, edit, req.requestor);
            return empty();
          }
          const project = await customProject(req);
          const edit = editBody(req);
          if (edit.restore) {
            if (!deps.restore) throw badRequest('Volume snapshots are not available');
            await deps.restore(req.params.pool!, project, req.params.name!, edit.restore, req);
            return empty();
          }
          await custom.update(req.params.pool!, project, req.params.name!, edit, undefined, req.requestor);
          return empty();
        },
      },
      delete: {
        description: 'Delete a custom volume',
        handler: async (req) => {
          onlyCustom(volumeType(req.params.type), 'deleted');
          await custom.delete(req.params.pool!, await customProject(req), req.params.name!, req.requestor);
          return empty();
        },
      },
      post: {
        description: 'Rename a custom volume, move it to another pool or project, or send it to another server (migration)',
        errors: [409],
        answers: ['sync', 'operation'],
        body: objectBody({
          name: bodyShape.text, pool: bodyShape.text, project: bodyShape.text, migration: bodyShape.flag, volume_only: bodyShape.flag, target: bodyShape.object,
        }),
        handler: async (req) => {
          onlyCustom(volumeType(req.params.type), 'renamed or moved');
          const pool = req.params.pool!;
          const project = await customProject(req);
          const name = req.params.name!;
          const body = bodyObject(req.body);
          custom.get(project, pool, name);
          if (optionalBool(body.migration, 'migration')) {
            // To another server: the target pulls from this operation, or (with `target`) we push to it.
            if (body.target !== undefined && body.target !== null && !isPlainObject(body.target)) throw badRequest('"target" must be an object');
            return async(volumeMigrationSource(ctx, custom, volumes, req, {
              pool, project, name, volumeOnly: optionalBool(body.volume_only, 'volume_only') ?? false,
              target: isPlainObject(body.target) ? body.target : undefined,
            }));
          }
          const newName = body.name === undefined || body.name === '' ? name : checkVolumeName(body.name);
          const toPool = optionalString(body.pool, 'pool') || pool;
          const toProject = optionalString(body.project, 'project')
            ? await featureProjectOf(ctx.services, body.project, 'storage.volumes')
            : project;
          if (toPool === pool && optionalString(body.project, 'project') === undefined) {
            await custom.rename(pool, project, name, { name: newName, project }, req.requestor);
            return sync({}, { location: volumeUrl(pool, 'custom', newName, project) });
          }
          await pools.usable(toPool);
          return volumeTask(ctx, req, { pool, project, name }, 'Moving storage volume', () =>
            custom.move(pool, project, name, { pool: toPool, project: toProject, name: newName }, req.requestor));
        },
      },
    },
    {
      path: `${BASE}/{type}/{name}/state`,
      extension: 'storage_volume_state',
      get: {
        description: 'Usage of a storage volume',
        handler: async (req) => {
          const pool = req.params.pool!;
          const type = volumeType(req.params.type);
          let ref;
          if (type === 'custom') {
            const project = await customProject(req);
            custom.get(project, pool, req.params.name!);
            ref = customRef(project, req.params.name!);
          } else {
            ref = (await findInstanceVolume(pool, type, req.params.name!, req)).ref;
          }
          const used = await volumes.volumeUsage(pool, ref);
          return sync({ usage: used === undefined ? null : { used } });
        },
      },
    },
    ...(deps.more ?? []),
  ];
  return routes;
}

