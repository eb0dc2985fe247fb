/** Where a member's etcd listens: etcd's registered ports on the host of the member's cluster address. */
import type { EtcdMemberUrls } from '../../sdk/index.js';

export const ETCD_CLIENT_PORT = 2379;
export const ETCD_PEER_PORT = 2380;

export function etcdUrls(name: string, host: string): EtcdMemberUrls {
  const h = host.includes(':') ? `[${host}]` : host;
  return { name, peerUrl: `https://${h}:${ETCD_PEER_PORT}`, clientUrl: `https://${h}:${ETCD_CLIENT_PORT}` };
}
