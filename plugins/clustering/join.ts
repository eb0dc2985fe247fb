/**
 * `PUT /1.0/cluster` with a cluster to join (how `lxd init --preseed` joins): the joiner asks a member
 * to accept it at `/internal/cluster/accept` over TLS pinned to the cluster certificate (the token's
 * fingerprint), gets the cluster certificate pair and its etcd peers, serves with the cluster
 * certificate and starts its etcd member in the cluster; its store switches to the cluster's. Each
 * step is undone when a later one fails: the server stays standalone and the member forgets it.
 */
import { async, badRequest, ApiError, type ApiRequest, type ApiResponse, type MemberConfigEntry } from '../../sdk/index.js';
import { canonicalAddress, isWildcard, splitAddress } from './address.js';
import { checkBare } from './bare.js';
import { currentCertificate, requireControl, type Clustering } from './context.js';
import { nameOrRefusal } from './enable.js';
import { decodeToken } from './join-token.js';
import { hostArchitecture, memberUrl } from './member.js';
import { MEMBERSHIP_WAIT_MS } from './membership-lock.js';
import { fingerprintOf, peerRequest } from './peer.js';

export interface JoinRequest {
  server_name: string;
  server_address?: string;
  cluster_address?: string;
  cluster_certificate?: string;
  cluster_password?: string;
  cluster_token?: string;
}

/** What `/internal/cluster/accept` takes and answers. */
export interface AcceptRequest {
  server_name: string;
  address: string;
  secret: string;
  architecture: string;
}
export interface AcceptAnswer {
  cluster_certificate: string;
  cluster_key: string;
  /** The cluster database's CA pair: the joiner issues its etcd certificate from it. */
  etcd_ca_certificate: string;
  etcd_ca_key: string;
  initial_cluster: string;
  member_id: string;
}

/** Whether a listener on `listen` answers at `address` (same address, or a wildcard on its port). */
function covers(listen: string, address: string): boolean {
  if (!listen.trim()) return false;
  const l = splitAddress(listen);
  const a = splitAddress(address);
  if (!l || !a) return false;
  return l.port === a.port && (isWildcard(listen) || canonicalAddress(listen) === canonicalAddress(address));
}

export async function joinCluster(c: Clustering, req: ApiRequest, body: JoinRequest): Promise<ApiResponse> {
  const name = nameOrRefusal(body.server_name);
  if (!body.server_address) throw badRequest('No server address provided for this member');
  const address = canonicalAddress(body.server_address);
  if (!address || isWildcard(address)) throw badRequest(`Invalid server address "${body.server_address}": a host and port other members can reach`);
  const tokenText = body.cluster_token || body.cluster_password || '';
  if (!tokenText) throw badRequest('A join token is required (cluster_token, or cluster_password as lxd init sends it)');
  const token = decodeToken(tokenText);
  if (!token) throw badRequest('The join token is not valid (trust passwords cannot be used to join: ask a member for a token with POST /1.0/cluster/members)');
  if (token.server_name !== name) throw badRequest(`The join token is for member "${token.server_name}", not "${name}"`);
  if (token.expires_at && Date.parse(token.expires_at) <= Date.now()) throw badRequest('The join token has expired');
  let fingerprint = token.fingerprint;
  if (body.cluster_certificate) {
    try {
      fingerprint = fingerprintOf(body.cluster_certificate);
    } catch {
      throw badRequest('The cluster certificate is not a valid PEM certificate');
    }
    if (fingerprint !== token.fingerprint.toLowerCase()) throw badRequest('The cluster certificate does not match the join token\'s fingerprint');
  }
  const targets = body.cluster_address ? [canonicalAddress(body.cluster_address) ?? body.cluster_address] : token.addresses;
  if (targets.length === 0) throw badRequest('No cluster address to join: give cluster_address');
  const listen = c.config.get('core.https_address');
  if (listen && !covers(listen, address)) {
    throw badRequest(`This server listens on "${listen}", not on ${address}: change core.https_address or join with a server address it covers`);
  }
  await checkBare(c.services);
  const control = requireControl(c);
  // Not on the network yet: listen on the address it joins with, as the reference does (lxd init sends
  // the join before any other key). A failed join takes the address back.
  const opened = !listen;
  if (opened) await c.config.update({ 'core.https_address': address });
  const closeAgain = async () => {
    if (opened) await c.config.update({ 'core.https_address': '' }).catch((e: Error) => c.log.error({ err: e }, 'could not stop listening after a failed join'));
  };

  const op = c.operations.create({
    class: 'task',
    description: 'Joining cluster',
    resources: { cluster: [] },
    request: req,
    requestor: req.requestor,
    run: async () => {
      const started = Date.now();
      // etcd's client loads while the member accepts this server.
      const preparing = control.prepare().catch(() => undefined);
      const accepted = await askToBeAccepted(targets, fingerprint, { server_name: name, address, secret: token.secret, architecture: hostArchitecture() })
        .catch(async (err: Error) => {
          await closeAgain();
          throw err;
        });
      const { answer, member } = accepted;
      await preparing;
      const previous = currentCertificate(control);
      let joined = false;
      try {
        await control.replaceCertificate(answer.cluster_certificate, answer.cluster_key);
        await control.join({ serverName: name, address, authority: { cert: answer.etcd_ca_certificate, key: answer.etcd_ca_key }, initialCluster: answer.initial_cluster, memberConfig: memberConfigOf(body) });
        joined = true;
        c.ownAddress = address;
        await c.membership.start(name);
      } catch (err) {
        // Joined but not running as a member (its lease not taken): leave again, out of etcd too.
        if (joined) {
          c.ownAddress = undefined;
          await c.membership.stop().catch(() => undefined);
          await control.leave().catch((e: Error) => c.log.error({ err: e }, 'could not leave the cluster after a failed join'));
        }
        await control.replaceCertificate(previous.cert, previous.key).catch((e: Error) => c.log.error({ err: e }, 'could not restore the server certificate after a failed join'));
        await forgetJoiner(member, fingerprint, name, { cert: answer.cluster_certificate, key: answer.cluster_key }).catch((e: Error) =>
          c.log.error({ err: e, member }, 'the member that accepted this server could not be told the join failed'));
        await closeAgain();
        throw err;
      }
      c.log.info({ member: name, via: member, ms: Date.now() - started }, 'joined the cluster');
      c.events.lifecycle('cluster-member-added', memberUrl(name), { requestor: req.requestor });
    },
  });
  return async(op);
}

/** The member may wait for another membership change before it accepts (MEMBERSHIP_WAIT_MS), then add a learner. */
const ACCEPT_ANSWER_MS = MEMBERSHIP_WAIT_MS + 25_000;

/** Try the token's addresses in turn; a refusal (bad token, name taken) ends the tries at once. */
async function askToBeAccepted(targets: string[], fingerprint: string, request: AcceptRequest): Promise<{ answer: AcceptAnswer; member: string }> {
  const failures: string[] = [];
  for (const target of targets) {
    let res;
    try {
      res = await peerRequest({ address: target, fingerprint, method: 'POST', path: '/internal/cluster/accept', body: request, timeoutMs: ACCEPT_ANSWER_MS });
    } catch (err) {
      failures.push(`${target}: ${(err as Error).message}`);
      continue;
    }
    if (res.status === 200 && res.body?.metadata?.cluster_certificate) return { answer: res.body.metadata as AcceptAnswer, member: target };
    const message = typeof res.body?.error === 'string' ? res.body.error : `answered ${res.status}`;
    throw new ApiError(res.status >= 400 && res.status < 500 ? 400 : 503, `Failed request to add member: ${message}`);
  }
  throw new ApiError(503, `No cluster member could be reached to join: ${failures.join('; ')}`);
}

/** Undo an accepted join on the member that accepted it (the joiner now holds the cluster certificate). */
async function forgetJoiner(member: string, fingerprint: string, name: string, client: { cert: string; key: string }): Promise<void> {
  const res = await peerRequest({ address: member, fingerprint, method: 'POST', path: '/internal/cluster/forget', body: { server_name: name }, client });
  if (res.status !== 200) throw new Error(res.body?.error ?? `answered ${res.status}`);
}


/** The joiner's member-specific keys as its PUT /1.0/cluster gave them (`member_config`). */
function memberConfigOf(body: JoinRequest): MemberConfigEntry[] {
  const given = (body as { member_config?: unknown }).member_config;
  if (!Array.isArray(given)) return [];
  return given.filter((e): e is MemberConfigEntry => !!e && typeof e === 'object' && typeof e.entity === 'string' && typeof e.name === 'string' && typeof e.key === 'string')
    .map((e) => ({ entity: e.entity, name: e.name, key: e.key, value: typeof e.value === 'string' ? e.value : '', description: typeof e.description === 'string' ? e.description : '' }));
}
