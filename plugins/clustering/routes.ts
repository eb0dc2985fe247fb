/** /1.0/cluster, its members, tokens and certificate, and the members' internal join and leave steps. */
import Joi from 'joi';
import {
  InstanceEvacuationRef,
  async, badRequest, conflict, bodyObject, bodyShape, collection, empty, forbidden, notFound, objectBody, sync,
  NetworksServiceRef, StorageServiceRef, truthy,
  type ApiRequest, type RouteDescriptor,
} from '../../sdk/index.js';
import { acceptMember, dropMember } from './accept.js';
import { checkPair, type ClusterCertificate } from './cluster-certificate.js';
import { currentCertificate, requireClustered, requireControl, type Clustering } from './context.js';
import { enableClustering, nameOrRefusal } from './enable.js';
import { joinCluster } from './join.js';
import { Keys } from './keys.js';
import { parseExpiry } from './expiry.js';
import { demoteSelf } from './demotion.js';
import { oneMembershipChange } from './membership-lock.js';
import { changeState, renameMember, updateMember } from './member-edit.js';
import { memberConfigKeys } from './member-config.js';
import { editable, memberUrl, type MemberView } from './member.js';
import { fingerprintOf } from './peer.js';
import { leaveCluster, removeMember } from './removal.js';

const clusterPutBody = objectBody({
  server_name: bodyShape.text,
  enabled: bodyShape.flag,
  server_address: bodyShape.text,
  cluster_address: bodyShape.text,
  cluster_certificate: bodyShape.text,
  cluster_password: bodyShape.text,
  cluster_token: bodyShape.text,
  member_config: bodyShape.objects,
});

const memberPutBody = objectBody({
  roles: bodyShape.names,
  failure_domain: bodyShape.text,
  description: bodyShape.text,
  config: bodyShape.config,
  groups: bodyShape.names,
});

/** Internal steps come from a member holding the cluster certificate (it presents it as client certificate). */
function requireClusterPeer(c: Clustering, req: ApiRequest): void {
  const control = requireControl(c);
  const presented = req.clientCertificate;
  const cluster = control.certificate()?.cert;
  let same = false;
  try {
    same = !!presented && !!cluster && fingerprintOf(presented) === fingerprintOf(cluster);
  } catch { /* not a certificate */ }
  if (!same) throw forbidden('Only cluster members may call this');
}

export function clusterRoutes(c: Clustering, certificate: ClusterCertificate): RouteDescriptor[] {
  const findView = async (name: string): Promise<MemberView> => {
    requireClustered(c);
    const view = await c.membership.view(name);
    if (!view) throw notFound('Cluster member not found');
    return view;
  };

  return [
    {
      path: '/1.0/cluster',
      extension: 'clustering',
      get: {
        description: 'Show whether this server is clustered, its member name and the member-specific keys a joiner gives',
        handler: async () => sync({
          server_name: c.cluster.enabled ? c.cluster.serverName : '',
          enabled: c.cluster.enabled,
          member_config: c.cluster.enabled ? await requireControl(c).memberConfigKeys() : await memberConfigKeys(c.services.get(StorageServiceRef), c.services.get(NetworksServiceRef)),
        }),
      },
      put: {
        description: 'Enable clustering on a standalone server, or join a cluster (server_address, cluster_address, token)',
        access: 'admin',
        answers: ['operation'],
        body: clusterPutBody,
        handler: async (req) => {
          const body = bodyObject(req.body);
          const enabled = body.enabled === true;
          const name = typeof body.server_name === 'string' ? body.server_name : '';
          if (enabled && !name) throw badRequest('ServerName is required when enabling clustering');
          if (!enabled && name) throw badRequest('ServerName must be empty when disabling clustering');
          if (!enabled) {
            requireClustered(c);
            throw badRequest('Disabling clustering is not supported: remove the member with DELETE /1.0/cluster/members/<name>');
          }
          if (c.cluster.enabled) throw badRequest('This server is already clustered');
          const joining = body.cluster_address || body.cluster_token || body.cluster_password || body.cluster_certificate;
          if (!joining) return enableClustering(c, req, name);
          return joinCluster(c, req, body as Parameters<typeof joinCluster>[2]);
        },
      },
    },
    {
      path: '/1.0/cluster/members',
      extension: 'clustering',
      get: {
        description: 'List the cluster members',
        conventions: ['recursion', 'filter'],
        errors: [503],
        handler: async () => {
          requireClustered(c);
          return collection(await c.membership.views(), (m) => memberUrl(m.server_name), (m) => m);
        },
      },
      post: {
        description: 'Issue a join token for a new member (a token operation; its metadata is what lxc prints as the token)',
        access: 'admin',
        answers: ['operation'],
        errors: [409, 503],
        body: objectBody({ server_name: bodyShape.text }),
        handler: async (req) => {
          requireClustered(c);
          const control = requireControl(c);
          const name = nameOrRefusal(typeof req.body.server_name === 'string' ? req.body.server_name : '');
          const members = await c.membership.list();
          if (members.some((m) => m.name === name)) throw conflict(`The cluster already has a member with name: ${name}`);
          const own = members.find((m) => m.name === c.cluster.serverName);
          // This member first: the joiner tries the addresses in order.
          const addresses = [own, ...members.filter((m) => m !== own && c.membership.health.isOnline(m.name))].filter((m) => m).map((m) => m!.address);
          const op = await c.tokens.issue({
            name,
            fingerprint: fingerprintOf(currentCertificate(control).cert),
            addresses,
            lifetimeMs: parseExpiry(c.config.get(Keys.joinTokenExpiry) || '3H'),
            requestor: req.requestor,
          });
          c.events.lifecycle('cluster-token-created', '/1.0/cluster/members', { requestor: req.requestor, context: { server_name: name } });
          return async(op);
        },
      },
    },
    {
      path: '/1.0/cluster/members/{name}',
      extension: 'clustering',
      current: async (req) => editable(await findView(req.params.name!)),
      get: {
        description: 'Show a cluster member',
        errors: [503],
        handler: async (req) => {
          const view = await findView(req.params.name!);
          return sync(view, { etag: editable(view) });
        },
      },
      put: {
        description: 'Change a member\'s description, failure domain, assigned roles and config',
        access: 'admin',
        errors: [412, 503],
        body: memberPutBody,
        handler: async (req) => {
          const current = await findView(req.params.name!);
          await updateMember(c, req, req.params.name!, current, bodyObject(req.body));
          return empty();
        },
      },
      post: {
        description: 'Rename a cluster member',
        access: 'admin',
        errors: [409, 503],
        body: objectBody({ server_name: bodyShape.text }),
        handler: async (req) => {
          await renameMember(c, req, req.params.name!, req.body.server_name);
          return empty();
        },
      },
      delete: {
        description: 'Remove a member from the cluster (force: even when it is offline)',
        access: 'admin',
        errors: [503],
        query: Joi.object({ force: Joi.string().allow('') }).unknown(true),
        handler: async (req) => {
          await removeMember(c, req, req.params.name!, truthy(req.query.force));
          return empty();
        },
      },
    },
    {
      path: '/1.0/cluster/members/{name}/state',
      extension: 'clustering_evacuation',
      // Served by the member named: its instances are the ones the instances family stops or moves.
      locate: (req) => (c.cluster.members().some((m) => m.name === req.params.name) ? req.params.name : undefined),
      post: {
        description: 'Evacuate or restore a cluster member (the member state here; its instances through InstanceEvacuationRef)',
        access: 'admin',
        answers: ['operation'],
        errors: [503],
        body: objectBody({ action: bodyShape.text, mode: bodyShape.text }),
        handler: async (req) => {
          const mode = req.body.mode || undefined;
          if (mode !== undefined && !['auto', 'stop', 'migrate'].includes(mode)) throw badRequest(`Unknown evacuation mode "${mode}" (auto, stop or migrate)`);
          const changed = await changeState(c, req, req.params.name!, req.body.action);
          const evacuation = c.services.get(InstanceEvacuationRef);
          const op = c.operations.create({
            class: 'task', description: changed!.description, resources: { cluster: [] }, request: req, requestor: req.requestor,
            run: async (o) => {
              if (req.body.action === 'evacuate') await evacuation?.evacuate({ mode, signal: o.signal });
              else await evacuation?.restore({ signal: o.signal });
            },
          });
          return async(op);
        },
      },
    },
    {
      path: '/1.0/cluster/certificate',
      extension: 'clustering_update_cert',
      put: {
        description: 'Replace the cluster certificate on every member',
        access: 'admin',
        errors: [503],
        body: objectBody({ cluster_certificate: bodyShape.text, cluster_certificate_key: bodyShape.text }),
        handler: async (req) => {
          requireClustered(c);
          requireControl(c);
          const pair = checkPair(req.body.cluster_certificate, req.body.cluster_certificate_key);
          await certificate.replace(pair);
          c.events.lifecycle('cluster-certificate-updated', '/1.0/cluster/certificate', { requestor: req.requestor });
          return empty();
        },
      },
    },
    {
      path: '/internal/cluster/accept',
      extension: 'clustering_join',
      post: {
        description: 'A joining server, holding a join token, asks to be added (TLS pinned to the cluster certificate by the token)',
        access: 'untrusted',
        errors: [403, 409, 503],
        body: objectBody({ server_name: bodyShape.text, address: bodyShape.text, secret: bodyShape.text, architecture: bodyShape.text }),
        handler: async (req) => sync(await acceptMember(c, {
          server_name: req.body.server_name ?? '',
          address: req.body.address ?? '',
          secret: req.body.secret ?? '',
          architecture: req.body.architecture ?? '',
        })),
      },
    },
    {
      path: '/internal/cluster/forget',
      extension: 'clustering_join',
      post: {
        description: 'A joiner whose join failed after it was accepted asks to be taken out again',
        access: 'untrusted',
        body: objectBody({ server_name: bodyShape.text }),
        handler: async (req) => {
          requireClusterPeer(c, req);
          const name = nameOrRefusal(req.body.server_name ?? '');
          if (c.membership.health.isOnline(name)) throw badRequest(`Member "${name}" is online: it is not a failed join`);
          const control = requireControl(c);
          await oneMembershipChange(control, `taking out the failed join of ${name}`, () => dropMember(c, control, c.membership.records, name));
          return empty();
        },
      },
    },
    {
      path: '/internal/cluster/demote',
      extension: 'clustering_roles',
      post: {
        description: 'The etcd leader\'s member asks this member to demote its database member to a standby (more voters than wanted)',
        access: 'untrusted',
        errors: [409, 503],
        handler: async (req) => {
          requireClusterPeer(c, req);
          await demoteSelf(c);
          return empty();
        },
      },
    },
    {
      path: '/internal/cluster/leave',
      extension: 'clustering',
      post: {
        description: 'A member tells this one it was removed from the cluster: stop its etcd member and become standalone',
        access: 'untrusted',
        handler: async (req) => {
          requireClustered(c);
          requireClusterPeer(c, req);
          if (await c.membership.get(c.cluster.serverName)) throw badRequest('This member is still in the cluster');
          setImmediate(() => void leaveCluster(c).catch((err: Error) => c.log.error({ err }, 'leaving the cluster failed')));
          return empty();
        },
      },
    },
  ];
}
