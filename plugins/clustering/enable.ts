/**
 * `PUT /1.0/cluster` on a standalone server with only `server_name`: it becomes the first member. Its
 * own member record is written before the store moves to etcd, so the copy takes it along; a failed
 * bootstrap leaves the server standalone on its sqlite store, the record removed again.
 */
import { async, badRequest, type ApiRequest, type ApiResponse } from '../../sdk/index.js';
import { canonicalAddress, isWildcard } from './address.js';
import { requireControl, type Clustering } from './context.js';
import { Keys } from './keys.js';
import { checkMemberName, hostArchitecture, memberUrl, type MemberRecord } from './member.js';

/** The address other members will reach this one at: `cluster.https_address`, else `core.https_address`. */
export function ownListenAddress(c: Clustering): string {
  const configured = c.config.get(Keys.httpsAddress) || c.config.get('core.https_address');
  if (isWildcard(configured)) {
    throw badRequest(`Cannot use wildcard core.https_address "${configured}" for cluster.https_address. Please specify a new cluster.https_address or core.https_address`);
  }
  const address = canonicalAddress(configured);
  if (!address) throw badRequest(`Invalid cluster address "${configured}"`);
  return address;
}

export function enableClustering(c: Clustering, req: ApiRequest, serverName: string): ApiResponse {
  const name = nameOrRefusal(serverName);
  const address = ownListenAddress(c);
  const control = requireControl(c);
  const op = c.operations.create({
    class: 'task',
    description: 'Creating bootstrap node',
    resources: { cluster: [] },
    request: req,
    requestor: req.requestor,
    run: async () => {
      const record: MemberRecord = {
        name,
        address,
        description: '',
        failure_domain: 'default',
        architecture: hostArchitecture(),
        config: {},
        roles: [],
        state: 'normal',
        joined_at: new Date().toISOString(),
      };
      await c.membership.records.put('', name, record);
      try {
        await control.bootstrap({ serverName: name, address });
      } catch (err) {
        await c.membership.records.delete('', name).catch(() => undefined);
        throw err;
      }
      c.ownAddress = address;
      await c.membership.start(name);
      c.events.lifecycle('cluster-enabled', memberUrl(name), { requestor: req.requestor });
    },
  });
  return async(op);
}

export function nameOrRefusal(name: string): string {
  try {
    return checkMemberName(name);
  } catch (err) {
    throw badRequest((err as Error).message);
  }
}
