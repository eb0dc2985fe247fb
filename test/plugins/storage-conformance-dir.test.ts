/** The dir driver against the storage driver conformance suite. */
import { driverFromPlugins, storageDriverConformance } from '../../sdk/testing/storage-conformance.js';

storageDriverConformance({
  driver: 'dir',
  factory: driverFromPlugins(['storage', 'storage-dir'], 'dir'),
  capabilities: ['snapshots', 'usage'],
});
