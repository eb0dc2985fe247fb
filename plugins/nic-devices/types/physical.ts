/**
 * `physical`: a host interface (or its VLAN interface) moves into the instance. It keeps its own
 * MAC address unless one is asked for; its MAC address and MTU come back at stop.
 */
import type { NicType } from '../../../sdk/index.js';
import { checkBuiltinNic, hostInterfaceExists, OPTIONS } from '../options.js';
import { readSys, vlanParent, type BuiltinDeps } from './deps.js';

export function physicalNic(deps: BuiltinDeps): NicType {
  return {
    nictype: 'physical',
    options: OPTIONS.physical,
    networkTypes: ['physical'],
    networkDecides: true,
    keepsHwaddr: true,
    validate: checkBuiltinNic,

    async start(s) {
      const c = s.config;
      const parent = await vlanParent(deps, s);
      delete s.changes.hwaddr;
      if (s.volatile.hwaddr && !c.hwaddr) s.changes.hwaddr = '';
      s.nic.hwaddr = c.hwaddr || undefined;
      s.changes['last_state.hwaddr'] = readSys(parent, 'address') ?? '';
      s.changes['last_state.mtu'] = readSys(parent, 'mtu') ?? '';
      Object.assign(s.nic, { kind: 'phys', link: parent });
    },

    async stop(ctx) {
      const v = ctx.volatile;
      if (!ctx.parent || !hostInterfaceExists(ctx.parent)) return;
      if (v['last_state.mtu']) await deps.host.run('ip', ['link', 'set', ctx.parent, 'mtu', v['last_state.mtu']], true);
      if (v['last_state.hwaddr']) await deps.host.run('ip', ['link', 'set', ctx.parent, 'address', v['last_state.hwaddr']], true);
      return { 'last_state.mtu': '', 'last_state.hwaddr': '' };
    },
  };
}
