/** /1.0/operations: list (grouped by status), one, wait, cancel and the websocket of websocket-class operations. */
import Joi from 'joi';
import { badRequest, empty, forbidden, notFound, sameSecret, sync, type ApiRequest, type RouteDescriptor } from '../../sdk/index.js';
import type { OperationManager } from './manager.js';
import type { OperationRecord } from './operation.js';
import type { KernelRequest } from '../http/api-request.js';
import type { OperationOwners } from '../cluster/operation-owners.js';

/** In a cluster: where other members' operations are found (kernel/cluster/operation-owners.ts). */
export interface ClusterOperations {
  enabled(): boolean;
  owners: OperationOwners;
}

export function operationRoutes(ops: OperationManager, cluster?: ClusterOperations): RouteDescriptor[] {
  /**
   * Another member's operation is answered by that member (the pipeline forwards there). A request
   * another member forwarded is answered here, found or not: it is never searched for again.
   */
  const locate = (req: ApiRequest): Promise<string | undefined> | undefined => {
    const id = req.params.id!;
    if (!cluster || ops.get(id) || (req as KernelRequest).caller.forwardedBy !== undefined) return undefined;
    return cluster.owners.find(id);
  };
  /** A restricted client does not learn that another project's operation exists. */
  const find = (id: string, req?: ApiRequest): OperationRecord => {
    const op = ops.get(id);
    if (!op || (req?.restrictedTo && !req.restrictedTo.includes(op.project))) throw notFound('Operation not found');
    return op;
  };

  /** For an untrusted caller: the operation only if its metadata carries this secret; 403 otherwise, whether it exists or not. */
  const findBySecret = (id: string, secret: string | undefined): OperationRecord => {
    const op = ops.get(id);
    const held = op?.view().metadata?.secret;
    if (!op || !secret || typeof held !== 'string' || !sameSecret(held, secret)) throw forbidden();
    return op;
  };

  return [
    {
      path: '/1.0/operations',
      get: {
        // Grouped by status: URLs, or (recursion 1) the operations themselves.
        conventions: ['recursion'],
        // A restricted caller lists only its own projects' operations: none, in a project not its own.
        access: 'filtered',
        // The listing shows the operations alone, and each of their changes moves the revision.
        reuse: () => String(ops.revision()),
        handler: async (req) => {
          const grouped: Record<string, unknown[]> = {};
          for (const op of ops.list(req.allProjects ? undefined : req.project)) {
            if (req.restrictedTo && !req.restrictedTo.includes(op.project)) continue;
            const view = op.view();
            (grouped[view.status.toLowerCase()] ??= []).push(req.recursion === 0 ? op.url : view);
          }
          // In a cluster the listing is every member's (each asked for its own, as this caller), unless a member was named.
          const caller = (req as KernelRequest).caller;
          if (cluster?.enabled() && caller.forwardedBy === undefined && req.target === undefined) {
            const scope = req.allProjects ? 'all-projects=true' : `project=${encodeURIComponent(req.project)}`;
            for (const other of await cluster.owners.gather(`recursion=${req.recursion === 0 ? 0 : 1}&${scope}`, caller)) {
              for (const [status, items] of Object.entries(other)) if (Array.isArray(items)) (grouped[status] ??= []).push(...items);
            }
          }
          return sync(grouped);
        },
      },
    },
    {
      path: '/1.0/operations/{id}',
      locate,
      get: { handler: (req) => sync(find(req.params.id!, req).view()) },
      delete: {
        handler: async (req) => {
          await find(req.params.id!, req).cancel();
          return empty();
        },
      },
    },
    {
      path: '/1.0/operations/{id}/wait',
      locate,
      get: {
        // An untrusted caller waits with the secret the operation carries (a daemon pushing an image), as for the reference.
        access: 'untrusted',
        query: Joi.object({
          timeout: Joi.number().integer().min(-1),
          secret: Joi.string().allow('').description('For untrusted callers: the secret in the operation\'s metadata'),
        }).unknown(true),
        handler: async (req) => {
          const op = req.trusted ? find(req.params.id!, req) : findBySecret(req.params.id!, req.query.secret);
          const timeout = req.query.timeout === undefined ? -1 : Number(req.query.timeout);
          // A caller that hangs up stops waiting: its request is not kept until the operation ends.
          await op.wait(timeout < 0 ? undefined : timeout * 1000, req.signal);
          return sync(op.view());
        },
      },
    },
    {
      path: '/1.0/operations/{id}/websocket',
      locate,
      // The secret is the credential here, as for the reference.
      websocket: {
        access: 'untrusted',
        query: Joi.object({ secret: Joi.string().allow('').description('The secret of one of the operation\'s websockets') }).unknown(true),
        accept: (req) => {
          const op = find(req.params.id!, req);
          if (op.spec.class !== 'websocket') throw badRequest('This operation has no websockets');
          if (!req.query.secret) throw forbidden('Missing websocket secret');
          if (op.isFinal) throw badRequest('The operation has already finished');
          if (!op.hasSecret(req.query.secret)) throw forbidden('Wrong websocket secret');
          if (op.isOpened(req.query.secret)) throw badRequest('This websocket is already connected');
        },
        handler: (req, socket) => {
          // The operation may have ended, or the socket been taken, while the upgrade went on.
          const op = ops.get(req.params.id!);
          if (!op?.connect(req.query.secret!, socket)) socket.close(1008, 'The websocket is no longer available');
        },
      },
    },
  ];
}
