/** GET /, and GET/PUT/PATCH /1.0 (PATCH is derived by the pipeline from PUT and `current`). */
import Joi from 'joi';
import { badRequest, empty, sync, type EventsService, type RouteDescriptor } from '../../sdk/index.js';
import type { ServerInfo } from './server-info.js';
import type { ServerConfigStore } from '../config/server-config.js';

const ROOT = Object.freeze(['/1.0']);

/** The server's root: every listener serves it, even one made for part of the API. */
export const ROOT_PATHS: readonly string[] = Object.freeze(['/', '/1.0']);

/** Config values are strings; null unsets a key, as the reference allows; `true` is how a write-only key comes back unchanged. */
export const configMap = Joi.object().pattern(Joi.string(), Joi.alternatives().try(Joi.string().allow(''), Joi.boolean()).allow(null)).allow(null);

/** Strings for the store; a boolean `true` stays as it is (the config store knows which keys are write-only). */
export function stringifyConfig(config: Record<string, unknown> | undefined): Record<string, string | true> {
  const out: Record<string, string | true> = {};
  for (const [key, value] of Object.entries(config ?? {})) out[key] = value === true ? true : value === null || value === undefined ? '' : String(value);
  return out;
}

export function serverRoutes(info: ServerInfo, config: ServerConfigStore, events: EventsService): RouteDescriptor[] {
  return [
    {
      path: '/',
      get: { access: 'untrusted', reuse: true, handler: () => sync(ROOT) },
    },
    {
      path: '/1.0',
      current: () => info.editable(),
      get: {
        access: 'untrusted',
        handler: (req) => (req.trusted ? sync(info.trusted(req.project), { etag: info.editable() }) : sync(info.untrusted())),
      },
      put: {
        access: 'admin',
        body: Joi.object({ config: configMap.default({}) }).unknown(true).required(),
        handler: async (req) => {
          if (req.body === null || typeof req.body !== 'object' || Array.isArray(req.body)) throw badRequest('Request body must be a JSON object');
          const changed = await config.replace(stringifyConfig(req.body.config ?? {}));
          if (Object.keys(changed).length) {
            req.log.info({ keys: Object.keys(changed) }, 'server configuration updated');
            info.invalidate();
          }
          events.lifecycle('config-updated', '/1.0', { requestor: req.requestor });
          return empty();
        },
      },
    },
  ];
}
