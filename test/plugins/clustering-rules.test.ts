/** The clustering plugin's pure rules: database roles from etcd's membership, token lifetimes and codec, addresses. */
import test from 'ava';
import { databaseRoles, etcdMemberOf } from '../../plugins/clustering/roles.js';
import { parseExpiry } from '../../plugins/clustering/expiry.js';
import { decodeToken, encodeToken } from '../../plugins/clustering/join-token.js';
import { canonicalAddress, isWildcard } from '../../plugins/clustering/address.js';
import { checkMemberName, type MemberRecord } from '../../plugins/clustering/member.js';

const record = (name: string, host: string, joined: number): MemberRecord => ({
  name, address: `${host}:8443`, description: '', failure_domain: 'default', architecture: 'x86_64', config: {}, roles: [], state: 'normal',
  joined_at: new Date(Date.UTC(2026, 0, 1, 0, 0, joined)).toISOString(),
});
const etcd = (name: string, host: string, learner: boolean, leader = false) => ({
  id: `id-${name}`, name, peerUrl: `https://${host}:2380`, clientUrl: `https://${host}:2379`, learner, leader,
});

test('voters are database (the leader first as database-leader), the first max_standby learners are standbys', (t) => {
  const records = [record('a', '10.0.0.1', 1), record('b', '10.0.0.2', 2), record('c', '10.0.0.3', 3), record('d', '10.0.0.4', 4)];
  const roles = databaseRoles(records, [etcd('a', '10.0.0.1', false, true), etcd('b', '10.0.0.2', true), etcd('c', '10.0.0.3', true), etcd('d', '10.0.0.4', true)], 2);
  t.deepEqual(Object.fromEntries(roles), { a: ['database-leader', 'database'], b: ['database-standby'], c: ['database-standby'], d: [] });
});

test('a renamed member keeps its etcd member, found by the peer URL host', (t) => {
  const renamed = record('new-name', '10.0.0.2', 2);
  const found = etcdMemberOf([renamed], [etcd('old-name', '10.0.0.2', false)]);
  t.is(found.get('new-name')?.id, 'id-old-name');
  t.deepEqual(databaseRoles([renamed], [etcd('old-name', '10.0.0.2', false)], 2).get('new-name'), ['database']);
  t.deepEqual(databaseRoles([renamed], [], 2).get('new-name'), [], 'no etcd member: no database role');
});

test('token lifetimes read as the reference writes them', (t) => {
  t.is(parseExpiry('3H'), 3 * 3600_000);
  t.is(parseExpiry('1H30M'), 90 * 60_000);
  t.is(parseExpiry('2d'), 2 * 86_400_000);
  for (const bad of ['', '3', 'H', '3h ', '3 H', '0H', '-1H', '3X']) t.throws(() => parseExpiry(bad), undefined, bad);
});

test('a token survives its base64 JSON form; anything else is no token', (t) => {
  const token = { server_name: 'm2', fingerprint: 'ab', addresses: ['10.0.0.1:8443'], secret: 's', expires_at: '2030-01-01T00:00:00Z' };
  t.deepEqual(decodeToken(encodeToken(token)), token);
  t.is(decodeToken('not base64 json'), undefined);
  t.is(decodeToken(Buffer.from('{"server_name":1}').toString('base64')), undefined);
  t.is(decodeToken(Buffer.from('{"server_name":"a","secret":"s","fingerprint":"f","addresses":[1]}').toString('base64')), undefined);
});

test('addresses get the default port; wildcards and empty hosts are not addresses to give out', (t) => {
  t.is(canonicalAddress('10.0.0.1'), '10.0.0.1:8443');
  t.is(canonicalAddress('[fd00::1]:9443'), '[fd00::1]:9443');
  t.is(canonicalAddress('a:b:c'), undefined);
  for (const w of ['', ':8443', '0.0.0.0:8443', '[::]:8443']) t.true(isWildcard(w), w);
  t.false(isWildcard('10.0.0.1:8443'));
});

test('member names are host name labels, never "none"', (t) => {
  for (const good of ['m1', 'node-2', 'A9']) t.is(checkMemberName(good), good);
  for (const bad of ['', 'none', '-x', 'x-', 'a/b', 'a.b', '123', 'x'.repeat(64), 42]) t.throws(() => checkMemberName(bad), undefined, String(bad));
});
