/** /1.0/networks, /1.0/networks/{name} and its /leases and /state. */
import {
  badRequest, bodyObject, bodyShape, collection, describedConfigBody, empty, networkUrl, notFound, optionalString, ProjectsServiceRef,
  renameBody, requestedProjectOf, stringMap, sync, UsedByMemo, visibleUrls,
  type ApiRequest, type HostTools, type RouteDescriptor, type ServiceRegistry,
} from '../../sdk/index.js';
import { hostInterfaceExists, hostInterfaceType, interfaceState } from './host-interfaces.js';
import type { HostInterface, HostInterfaceList } from './host-interface-list.js';
import type { NetworkEdit, NetworkManager } from './manager.js';
import { editableView, managedView, unmanagedView, type NetworkRecord } from './network.js';

function createBody(req: ApiRequest): NetworkRecord {
  const body = bodyObject(req.body);
  const type = optionalString(body.type, 'type') || 'bridge';
  return {
    name: optionalString(body.name, 'name') ?? '',
    type,
    description: optionalString(body.description, 'description') ?? '',
    config: stringMap(body.config, 'config'),
  };
}

function editBody(req: ApiRequest): NetworkEdit {
  const body = bodyObject(req.body);
  return { description: optionalString(body.description, 'description') ?? '', config: stringMap(body.config, 'config') };
}

type Entry = { managed: NetworkRecord } | { unmanaged: HostInterface };

/** In a cluster `?target=` shows that member's own keys too (the kernel forwarded the request to it). */
const configFor = (req: ApiRequest, rec: NetworkRecord) => (req.target && rec.members ? { ...rec.config, ...rec.members[req.target]?.config } : rec.config);

export function networkRoutes(manager: NetworkManager, tools: HostTools, services: ServiceRegistry, hostInterfaces: HostInterfaceList): RouteDescriptor[] {
  const entryName = (e: Entry) => ('managed' in e ? e.managed.name : e.unmanaged.name);

  // A restricted caller sees only its own projects' users of a network.
  const render = async (req: ApiRequest, e: Entry, memo?: UsedByMemo) => {
    const project = req.project;
    const usedBy = visibleUrls(await manager.usedBy.collect(project, entryName(e), memo), req.restrictedTo);
    return 'managed' in e
      ? managedView(e.managed, manager.status(project, e.managed.name, e.managed), usedBy, configFor(req, e.managed))
      : unmanagedView(e.unmanaged.name, e.unmanaged.type, usedBy);
  };

  /** The project the client named may be restricted to some networks (or none): the others do not exist for it. */
  const allowed = async (req: ApiRequest, e: Entry): Promise<boolean> =>
    (await services.get(ProjectsServiceRef)?.networkAllowed(requestedProjectOf(req), entryName(e), 'managed' in e)) ?? true;

  /** Unmanaged host interfaces belong to the default project only, in the kernel's order. */
  const entries = async (project: string): Promise<Entry[]> => {
    const managed = (await manager.records.list(project)).map((s) => s.doc);
    const out: Entry[] = managed.map((m) => ({ managed: m }));
    if (project === 'default') {
      const taken = new Set((await manager.list()).map((n) => n.name));
      for (const host of hostInterfaces.list()) if (!taken.has(host.name)) out.push({ unmanaged: host });
    }
    return out;
  };

  const entry = async (req: ApiRequest): Promise<Entry> => {
    const name = req.params.name!;
    const found = await manager.find(req.project, name);
    let e: Entry | undefined;
    if (found) e = { managed: found.doc };
    else if (req.project === 'default' && hostInterfaceExists(name) && !(await manager.list()).some((n) => n.name === name)) e = { unmanaged: { name, type: hostInterfaceType(name) } };
    if (!e || !(await allowed(req, e))) throw notFound('Network not found');
    return e;
  };

  const managedOnly = async (req: ApiRequest) => {
    const e = await entry(req);
    if (!('managed' in e)) throw badRequest(`Network "${req.params.name}" is not managed by this server`);
    return e.managed;
  };

  return [
    {
      path: '/1.0/networks',
      extension: 'network',
      get: {
        description: 'List the networks: managed ones and the host\'s interfaces',
        conventions: ['recursion', 'filter'],
        // Beside the records: which networks could not be brought up, and the host's interfaces (default project).
        reuse: (req) => {
          if (req.project !== 'default') return String(manager.statusRevision());
          const links = hostInterfaces.revision();
          return links === undefined ? undefined : `${manager.statusRevision()}.${links}`;
        },
        handler: async (req) => {
          const memo = new UsedByMemo();
          const all = await entries(req.project);
          const kept = await Promise.all(all.map((e) => allowed(req, e)));
          const seen = all.filter((_, i) => kept[i]);
          return collection(seen, (e) => networkUrl(req.project, entryName(e)), (e) => render(req, e, memo));
        },
      },
      post: {
        description: 'Create a managed network',
        errors: [409],
        body: describedConfigBody({ name: bodyShape.text, type: bodyShape.text }),
        handler: async (req) => {
          const rec = createBody(req);
          await manager.create(req.project, rec, req.requestor, req.target);
          return sync({}, { location: networkUrl(req.project, rec.name) });
        },
      },
    },
    {
      path: '/1.0/networks/{name}',
      extension: 'network',
      current: async (req) => {
        const rec = await managedOnly(req);
        return { ...editableView(rec), config: configFor(req, rec) };
      },
      get: {
        description: 'Show a network',
        handler: async (req) => {
          const e = await entry(req);
          return sync(await render(req, e), 'managed' in e ? { etag: { ...editableView(e.managed), config: configFor(req, e.managed) } } : {});
        },
      },
      put: {
        description: 'Replace the configuration of a managed network',
        body: describedConfigBody(),
        handler: async (req) => {
          await managedOnly(req);
          await manager.update(req.project, req.params.name!, editBody(req), req.requestor, req.target);
          return empty();
        },
      },
      post: {
        description: 'Rename a managed network',
        errors: [409],
        body: renameBody,
        handler: async (req) => {
          manager.checkRenamable();
          await managedOnly(req);
          const newName = optionalString(bodyObject(req.body).name, 'name') ?? '';
          if (newName === '') throw badRequest('No name provided');
          if (newName === req.params.name) throw badRequest('The network already has that name');
          await manager.rename(req.project, req.params.name!, newName, req.requestor);
          return sync({}, { location: networkUrl(req.project, newName) });
        },
      },
      delete: {
        description: 'Delete a managed network',
        handler: async (req) => {
          await managedOnly(req);
          await manager.delete(req.project, req.params.name!, req.requestor);
          return empty();
        },
      },
    },
    {
      path: '/1.0/networks/{name}/leases',
      extension: 'network_leases',
      get: {
        description: 'DHCP leases and reservations of a managed network',
        handler: async (req) => {
          const rec = await managedOnly(req).catch((err) => {
            throw err.status === 400 ? notFound('Network not found') : err;
          });
          const driver = manager.driverOf(rec);
          if (!driver.leases) throw badRequest(`Networks of type "${rec.type}" have no leases`);
          return sync(await driver.leases.list({ project: req.project, name: rec.name, type: rec.type, description: rec.description, config: { ...rec.config } }));
        },
      },
    },
    {
      path: '/1.0/networks/{name}/state',
      extension: 'network_state',
      get: {
        description: 'Live state of a network\'s host interface',
        handler: async (req) => {
          const e = await entry(req);
          const ifname = 'managed' in e
            ? manager.driverOf(e.managed).interfaceName({ project: req.project, name: e.managed.name, type: e.managed.type, description: e.managed.description, config: e.managed.config })
            : e.unmanaged.name;
          return sync(await interfaceState(tools, ifname));
        },
      },
    },
  ];
}
