/**
 * GET /openapi.json: the API description of this build, for whoever may read /1.0. Routes are sealed
 * once the daemon has booted, so the document is written once, at its first request, and kept.
 */
import { raw, type RouteDescriptor } from '../../sdk/index.js';

export const OPENAPI_PATH = '/openapi.json';

/** `describe` renders the document; `sealed` says whether the routes can still change (then nothing is kept). */
export function openApiRoute(describe: () => unknown, sealed: () => boolean): RouteDescriptor {
  let text: string | undefined;
  return {
    path: OPENAPI_PATH,
    get: {
      // The same policy as GET /1.0: anyone may read what the server offers.
      access: 'untrusted',
      description: 'The OpenAPI 3.1 description of this build (the document itself, not an envelope)',
      answers: ['raw'],
      handler: () => {
        const body = text ?? JSON.stringify(describe());
        if (sealed()) text = body;
        return raw(body, 'application/json');
      },
    },
  };
}
