/**
 * Routes of the local daemon itself, served on the unix socket only and outside the API: they are
 * not route descriptors, so no HTTPS listener, route table or API description ever has them.
 * `PUT /internal/shutdown` is where `corrald shutdown` asks for a host-shutdown stop (the
 * reference's `lxd shutdown` uses the same path on its socket).
 */
import type Hapi from '@hapi/hapi';
import type Logger from 'bunyan';
import { syncBody } from '../http/envelope.js';

export interface UnixOnlyActions {
  /** Stop the instances by boot.stop.priority, then the daemon; returns at once. */
  shutdown(): void;
  log: Logger;
}

export function addUnixOnlyRoutes(server: Hapi.Server, actions: UnixOnlyActions): void {
  server.route({
    method: 'PUT',
    path: '/internal/shutdown',
    options: { payload: { output: 'data', parse: false, maxBytes: 4096 } },
    handler: (_request, h) => {
      actions.log.info('asked to shut down through the unix socket');
      // After the answer is on its way: the unix listener is among the last things the shutdown closes.
      setImmediate(actions.shutdown);
      return h.response(syncBody({})).type('application/json');
    },
  });
}
