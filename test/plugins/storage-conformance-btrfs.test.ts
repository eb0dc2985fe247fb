/** The btrfs driver against the storage driver conformance suite, on loop-file pools. */
import { driverFromPlugins, storageDriverConformance } from '../../sdk/testing/storage-conformance.js';

storageDriverConformance({
  driver: 'btrfs',
  factory: driverFromPlugins(['storage', 'storage-btrfs'], 'btrfs'),
  poolConfig: () => ({ size: '1GiB' }),
  capabilities: ['snapshots', 'optimized backups', 'quotas', 'block volumes', 'refresh', 'usage'],
});
