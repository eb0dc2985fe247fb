/** The decisions of forwarding, without a network: which member answers, and what a peer may claim. */
import test from 'ava';
import { KernelClusterView } from '../../kernel/cluster/cluster-view.js';
import { forwardTarget } from '../../kernel/cluster/forward-target.js';
import { FORWARDED_CALLER_HEADER, LOCAL_EVENTS_HEADER, encodeCaller, peerCaller, stripPeerHeaders } from '../../kernel/cluster/peer-headers.js';
import { parseMemberAddress } from '../../kernel/cluster/peer-agents.js';
import { withTarget } from '../../kernel/cluster/forwarder.js';
import type { Caller, KernelRequest } from '../../kernel/http/api-request.js';
import { isApiError } from '../../sdk/index.js';

const user: Caller = { trusted: true, requestor: { username: 'alice', protocol: 'tls', address: '10.0.0.9:5555' } };

function clusterOf3(): KernelClusterView {
  const view = new KernelClusterView();
  view.setIdentity(true, 'm1');
  view.setMembers([
    { name: 'm1', address: '10.19.3.1:8443', online: true },
    { name: 'm2', address: '10.19.3.2:8443', online: true },
    { name: 'm3', address: '10.19.3.3:8443', online: false },
  ]);
  return view;
}

const request = (target: string | undefined, caller: Caller = user) => ({ target, caller }) as unknown as KernelRequest;

async function refusal(t: { fail(m?: string): void }, work: Promise<unknown>): Promise<{ status: number; message: string }> {
  try {
    await work;
  } catch (err) {
    if (isApiError(err)) return { status: err.status, message: err.message };
    throw err;
  }
  t.fail('expected a refusal');
  return { status: 0, message: '' };
}

test('a standalone server answers everything itself, whatever the request names', async (t) => {
  const view = new KernelClusterView();
  t.is(await forwardTarget(view, undefined, request('m2')), undefined);
  t.is(await forwardTarget(view, () => 'm2', request(undefined)), undefined);
});

test('?target= naming another member forwards there; naming this one, or nothing, stays here', async (t) => {
  const view = clusterOf3();
  t.is((await forwardTarget(view, undefined, request('m2')))?.name, 'm2');
  t.is(await forwardTarget(view, undefined, request('m1')), undefined);
  t.is(await forwardTarget(view, undefined, request(undefined)), undefined);
});

test('a route\'s locate decides over ?target= (a move names its destination in target)', async (t) => {
  const view = clusterOf3();
  t.is((await forwardTarget(view, async () => 'm2', request('m3')))?.name, 'm2');
  t.is(await forwardTarget(view, () => 'm1', request('m2')), undefined, 'the holder answers even when target names another member');
  t.is(await forwardTarget(view, () => undefined, request('m2')), undefined, 'locate saying "anyone" keeps the request here');
});

test('an offline member is a 503 naming it, an unknown one a 404', async (t) => {
  const view = clusterOf3();
  const offline = await refusal(t, forwardTarget(view, undefined, request('m3')));
  t.is(offline.status, 503);
  t.regex(offline.message, /"m3" is offline/);
  const unknown = await refusal(t, forwardTarget(view, undefined, request('m9')));
  t.is(unknown.status, 404);
  t.regex(unknown.message, /"m9" not found/);
});

test('a forwarded request that would be forwarded again is refused, not passed round', async (t) => {
  const view = clusterOf3();
  const forwarded: Caller = { ...user, peer: true, forwardedBy: 'm2' };
  t.is(await forwardTarget(view, undefined, request('m1', forwarded)), undefined, 'forwarded to its member: answered');
  const loop = await refusal(t, forwardTarget(view, () => 'm2', request(undefined, forwarded)));
  t.is(loop.status, 503);
  t.regex(loop.message, /forwarded this request here, but it belongs to member "m2"/);
});

test('the caller travels to the member intact, restriction included', (t) => {
  const restricted: Caller = { trusted: true, projects: ['p1', 'p2'], requestor: { username: 'bob', protocol: 'tls', address: '10.1.1.1:1' } };
  const header = encodeCaller(restricted, 'm1');
  const peer: Caller = { trusted: true, requestor: { username: 'cluster-fp', protocol: 'tls', address: '10.19.3.1:4000' } };
  const received = peerCaller({ [FORWARDED_CALLER_HEADER]: header }, peer);
  t.deepEqual(received, { trusted: true, projects: ['p1', 'p2'], requestor: restricted.requestor, peer: true, forwardedBy: 'm1' });
  const withCert = peerCaller({ [FORWARDED_CALLER_HEADER]: encodeCaller({ ...restricted, certificate: 'PEM' }, 'm1') }, peer);
  t.is(withCert.certificate, 'PEM', 'the caller\'s own certificate, not the member\'s');
  const untrusted = peerCaller({ [FORWARDED_CALLER_HEADER]: encodeCaller({ trusted: false, requestor: { username: '', protocol: 'tls', address: 'x' } }, 'm2') }, peer);
  t.false(untrusted.trusted, 'an untrusted caller stays untrusted on the member (operation secrets decide there)');
});

test('a peer without a forwarded caller, or with a malformed one, is itself asking: trusted, not marked forwarded', (t) => {
  const peer: Caller = { trusted: false, requestor: { username: 'fp', protocol: 'tls', address: 'a' } };
  for (const headers of [{}, { [FORWARDED_CALLER_HEADER]: 'not base64 json' }, { [FORWARDED_CALLER_HEADER]: Buffer.from('{"by":1}').toString('base64url') }]) {
    const caller = peerCaller(headers, peer);
    t.true(caller.trusted);
    t.true(caller.peer);
    t.is(caller.forwardedBy, undefined);
  }
});

test('headers only a peer may send are removed from anyone else\'s request', (t) => {
  const headers = { [FORWARDED_CALLER_HEADER]: encodeCaller(user, 'm1'), [LOCAL_EVENTS_HEADER]: '1', accept: 'application/json' };
  stripPeerHeaders(headers);
  t.deepEqual(headers, { accept: 'application/json' });
});

test('member addresses parse with their port, IPv6 in brackets', (t) => {
  t.deepEqual(parseMemberAddress('10.19.3.2:8443'), { host: '10.19.3.2', port: 8443 });
  t.deepEqual(parseMemberAddress('[fd00::2]:9443'), { host: 'fd00::2', port: 9443 });
  t.deepEqual(parseMemberAddress('10.19.3.2'), { host: '10.19.3.2', port: 8443 });
});

test('a forwarded request names the member that answers it in target, unless the caller named one', (t) => {
  t.is(withTarget('/1.0/instances', 'm2'), '/1.0/instances?target=m2');
  t.is(withTarget('/1.0/instances?project=p', 'm2'), '/1.0/instances?project=p&target=m2');
  t.is(withTarget('/1.0/instances?', 'm2'), '/1.0/instances?target=m2');
  t.is(withTarget('/1.0/instances/c1?target=m3', 'm2'), '/1.0/instances/c1?target=m3', 'a move keeps its destination');
  t.is(withTarget('/1.0/instances/c1?project=p&target=', 'm2'), '/1.0/instances/c1?project=p&target=', 'as sent, even empty');
  t.is(withTarget('/1.0/x?name=a%20b', 'm 2'), '/1.0/x?name=a%20b&target=m%202');
});
