/** /1.0/warnings and /1.0/warnings/<uuid>. */
import Joi from 'joi';
import { collection, empty, notFound, sync, type ApiRequest, type EventsService, type RouteDescriptor } from '../../sdk/index.js';
import type { WarningStore } from './service.js';
import { warningUrl, type Warning } from './warning.js';

const editable = (w: Warning) => ({ status: w.status });

export function warningRoutes(store: WarningStore, events: EventsService): RouteDescriptor[] {
  const find = async (req: ApiRequest) => {
    const found = await store.find(req.params.uuid!);
    if (!found) throw notFound('Warning not found');
    return found;
  };

  return [
    {
      path: '/1.0/warnings',
      extension: 'warnings',
      get: {
        conventions: ['recursion', 'filter', 'all-projects'],
        access: 'admin',
        handler: async (req) => {
          // Without ?project= every project's warnings are listed, as the reference does.
          const project = req.query.project && !req.allProjects ? req.project : undefined;
          return collection(await store.list(project), warningUrl, (w) => w);
        },
      },
    },
    {
      path: '/1.0/warnings/{uuid}',
      extension: 'warnings',
      current: async (req) => editable((await find(req)).doc),
      get: {
        access: 'admin',
        handler: async (req) => {
          const { doc } = await find(req);
          return sync(doc, { etag: editable(doc) });
        },
      },
      put: {
        access: 'admin',
        body: Joi.object({ status: Joi.string().valid('new', 'acknowledged').required() }).unknown(true).required(),
        handler: async (req) => {
          const { doc, rev, project } = await find(req);
          if (doc.status !== req.body.status) {
            await store.setStatus(project, doc, req.body.status, rev);
            events.lifecycle(req.body.status === 'acknowledged' ? 'warning-acknowledged' : 'warning-reset', warningUrl(doc), { project: doc.project || undefined, requestor: req.requestor });
          }
          return empty();
        },
      },
      delete: {
        access: 'admin',
        handler: async (req) => {
          const { doc, project } = await find(req);
          await store.remove(project, doc.uuid);
          events.lifecycle('warning-deleted', warningUrl(doc), { project: doc.project || undefined, requestor: req.requestor });
          return empty();
        },
      },
    },
  ];
}
