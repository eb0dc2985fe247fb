/** `macvlan`: a macvlan interface (bridge mode) on the parent, or on its VLAN interface. */
import type { NicType } from '../../../sdk/index.js';
import { checkBuiltinNic, OPTIONS } from '../options.js';
import { vlanParent, type BuiltinDeps } from './deps.js';

export function macvlanNic(deps: BuiltinDeps): NicType {
  return {
    nictype: 'macvlan',
    options: OPTIONS.macvlan,
    networkTypes: ['macvlan'],
    networkDecides: true,
    validate: checkBuiltinNic,

    async start(s) {
      const parent = await vlanParent(deps, s);
      Object.assign(s.nic, { kind: 'macvlan', link: parent, macvlanMode: 'bridge' });
    },
  };
}
