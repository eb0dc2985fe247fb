/** The warnings plugin: provides the warnings service and serves /1.0/warnings. */
import { definePlugin, WarningsServiceRef } from '../../sdk/index.js';
import { WarningStore } from './service.js';
import { warningRoutes } from './routes.js';
import type { Warning } from './warning.js';

export default definePlugin({
  register(ctx) {
    const store = new WarningStore(ctx.store.collection<Warning>('warnings'), ctx.serverName);
    ctx.services.provide(WarningsServiceRef, store);
    for (const route of warningRoutes(store, ctx.events)) ctx.routes.add(route);
  },
});
