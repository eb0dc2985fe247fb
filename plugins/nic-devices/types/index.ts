/** The nictypes this plugin brings; they register through the same extension point as anyone's. */
import type { NicType } from '../../../sdk/index.js';
import { bridgedNic } from './bridged.js';
import type { BuiltinDeps } from './deps.js';
import { macvlanNic } from './macvlan.js';
import { p2pNic } from './p2p.js';
import { physicalNic } from './physical.js';
import { routedNic } from './routed.js';

export function builtinNicTypes(deps: BuiltinDeps): NicType[] {
  return [bridgedNic(deps), macvlanNic(deps), p2pNic(deps), routedNic(deps), physicalNic(deps)];
}
