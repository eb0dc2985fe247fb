/** The web UI plugin: a small page at /ui/ for trusted browsers, calling the API from the same origin. */
import { definePlugin } from '../../sdk/index.js';
import { loadAssets } from './assets.js';
import { uiRoutes } from './routes.js';

export default definePlugin({
  register(ctx) {
    // Read once at start: the page is a handful of small files, and only these names can ever be served.
    const assets = loadAssets();
    for (const route of uiRoutes(assets)) ctx.routes.add(route);
  },
});
