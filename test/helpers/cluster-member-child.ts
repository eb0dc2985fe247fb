/**
 * A cluster member in its own process, for tests that kill a member with SIGKILL: it starts a kernel,
 * joins the cluster with what the test passes (JSON in argv[2]), holds a lease, prints "ready" and
 * waits to be killed.
 */
import path from 'node:path';
import { Kernel } from '../../kernel/kernel.js';
import { ClusterControlRef, type ClusterControl } from '../../sdk/index.js';
import { distRoot, projectRoot } from './daemon.js';

interface Orders {
  dataDir: string;
  serverName: string;
  address: string;
  authority: { cert: string; key: string };
  initialCluster: string;
  lease: { key: string; ttl: number };
}

const orders = JSON.parse(process.argv[2]!) as Orders;
const kernel = await Kernel.start({
  dataDir: orders.dataDir, storeFile: path.join(orders.dataDir, 'state.db'), registryFile: path.join(projectRoot, 'plugin-registry.json'),
  plugins: 'warnings', compiledRoot: distRoot, logLevel: 'fatal', serverCertificate: false,
});
const control = kernel.services.get(ClusterControlRef) as ClusterControl;
if (!kernel.cluster.enabled) {
  await control.join({ serverName: orders.serverName, address: orders.address, authority: orders.authority, initialCluster: orders.initialCluster, memberConfig: [] });
}
await control.holdLease(orders.lease.key, orders.serverName, orders.lease.ttl);
process.stdout.write('ready\n');
process.on('SIGTERM', () => void kernel.stop().then(() => process.exit(0)));
