/** `p2p`: a veth pair whose host end stays on its own, with optional host routes towards the instance. */
import type { NicType } from '../../../sdk/index.js';
import { addressList } from '../addresses.js';
import { checkBuiltinNic, OPTIONS } from '../options.js';
import { hostEnd, type BuiltinDeps } from './deps.js';

export function p2pNic(deps: BuiltinDeps): NicType {
  return {
    nictype: 'p2p',
    options: OPTIONS.p2p,
    validate: checkBuiltinNic,

    async start(s) {
      hostEnd(s);
    },

    async started(ctx) {
      const c = ctx.config;
      const port = ctx.run.nics?.[0]?.hostName;
      if (!port) return;
      await deps.host.limits(port, c['limits.ingress'] || c['limits.max'], c['limits.egress'] || c['limits.max']);
      await deps.host.routes(port, addressList(c['ipv4.routes']), addressList(c['ipv6.routes']));
    },
  };
}
