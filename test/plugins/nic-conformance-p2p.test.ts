/** The built-in p2p nictype against the NIC type conformance suite: the kit holds nic-devices' own types too. */
import { nicTypeConformance } from '../../sdk/testing/nic-type-conformance.js';

nicTypeConformance({ nictype: 'p2p', plugins: ['edge'], validConfig: { host_name: 'vp2pconform0', 'limits.ingress': '10Mbit' } });
