/** GET /1.0/events: the websocket notification stream, filtered by type and project. */
import Joi from 'joi';
import { badRequest, type EventType, type RouteDescriptor } from '../../sdk/index.js';
import { EVENT_TYPES, type EventHub } from './hub.js';
import { LOCAL_EVENTS_HEADER } from '../cluster/peer-headers.js';
import type { KernelRequest } from '../http/api-request.js';

/** Above this many queued bytes a listener is too slow to keep; it is dropped rather than buffered without bound. */
const MAX_BUFFERED = 64 * 1024 * 1024;
/** Listeners are pinged this often; one that did not answer the previous ping is gone and is dropped. */
const KEEPALIVE_MS = 10_000;

function parseTypes(value: string | undefined): Set<EventType> {
  if (!value) return new Set(EVENT_TYPES);
  const types = new Set<EventType>();
  for (const name of value.split(',').map((t) => t.trim()).filter(Boolean)) {
    if (!(EVENT_TYPES as string[]).includes(name)) throw badRequest(`Unknown event type "${name}" (known: ${EVENT_TYPES.join(', ')})`);
    types.add(name as EventType);
  }
  return types;
}

export function eventRoutes(hub: EventHub): RouteDescriptor[] {
  return [
    {
      path: '/1.0/events',
      websocket: {
        // Anyone trusted may listen, as with the reference; a restricted listener hears only its own projects.
        access: 'filtered',
        query: Joi.object({ type: Joi.string().allow('').description('Comma-separated event types (operation, logging, lifecycle); all when absent') }).unknown(true),
        accept: (req) => void parseTypes(req.query.type),
        handler: (req, socket) => {
          const detach = hub.attach({
            types: parseTypes(req.query.type),
            project: req.allProjects ? undefined : req.project,
            restrictedTo: req.restrictedTo,
            // Only a cluster peer can say this (the header is removed from anyone else's request).
            localOnly: (req as KernelRequest).caller.peer === true && req.headers[LOCAL_EVENTS_HEADER] === '1',
            send: (frame) => {
              if (socket.bufferedAmount > MAX_BUFFERED) socket.terminate();
              else socket.send(frame);
            },
          });
          let alive = true;
          socket.on('pong', () => (alive = true));
          const keepalive = setInterval(() => {
            if (!alive) return socket.terminate();
            alive = false;
            socket.ping('keepalive');
          }, KEEPALIVE_MS).unref();
          const close = () => {
            clearInterval(keepalive);
            detach();
          };
          socket.on('close', close);
          socket.on('error', close);
          // Listeners only listen; anything they send is ignored.
          socket.on('message', () => undefined);
        },
      },
    },
  ];
}
