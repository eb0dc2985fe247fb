/**
 * Serves the public images of the `default` project as a simplestreams image server, so any client
 * (the reference daemon included) can add this daemon with `--protocol simplestreams` and copy or
 * launch its images without a certificate of its own. Files are served as stored: no copy, no split.
 */
import { definePlugin, ImagesServiceRef, internalError } from '../../sdk/index.js';
import { simplestreamsRoutes } from './routes.js';

export default definePlugin({
  register(ctx) {
    const images = () => {
      const service = ctx.services.get(ImagesServiceRef);
      if (!service) throw internalError('The images plugin is not running');
      return service;
    };
    for (const route of simplestreamsRoutes(images)) ctx.routes.add(route);
  },
});
