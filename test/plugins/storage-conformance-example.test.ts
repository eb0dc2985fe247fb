/**
 * The vendor example driver (examples/storage-example, declared in plugin-registry.json with an
 * entry outside plugins/) loaded as the daemon loads it, against the conformance suite.
 */
import { driverFromPlugins, storageDriverConformance } from '../../sdk/testing/storage-conformance.js';

storageDriverConformance({
  driver: 'example',
  factory: driverFromPlugins(['storage', 'storage-example'], 'example'),
  capabilities: [],
});
