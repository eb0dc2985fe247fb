/**
 * The vendor example NIC type (examples/nic-example, declared in plugin-registry.json with an entry
 * outside plugins/) loaded as the daemon loads it, against the NIC type conformance suite.
 */
import { nicTypeConformance } from '../../sdk/testing/nic-type-conformance.js';

nicTypeConformance({ nictype: 'example', plugins: ['edge', 'nic-example'], validConfig: { host_name: 'vexconform0' } });
