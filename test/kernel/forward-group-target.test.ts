/** `?target=@<group>` in the kernel's forwarding decision, without a network (cluster groups: decision 0063). */
import test from 'ava';
import { KernelClusterView } from '../../kernel/cluster/cluster-view.js';
import { forwardTarget } from '../../kernel/cluster/forward-target.js';
import type { KernelRequest } from '../../kernel/http/api-request.js';
import { isApiError } from '../../sdk/index.js';

function clusterOf2(): KernelClusterView {
  const view = new KernelClusterView();
  view.setIdentity(true, 'm1');
  view.setMembers([
    { name: 'm1', address: '10.19.12.1:8443', online: true },
    { name: 'm2', address: '10.19.12.2:8443', online: true },
  ]);
  return view;
}

const request = (method: string, target: string) => ({ method, target, caller: { trusted: true, requestor: { username: 'u', protocol: 'tls', address: '' } } }) as unknown as KernelRequest;

test('a read naming a group is answered here (lxc launch --target @g looks its image up with it)', async (t) => {
  t.is(await forwardTarget(clusterOf2(), undefined, request('GET', '@g1')), undefined);
});

test('a change naming a group without placement is refused as naming no member, as the reference refuses it', async (t) => {
  const err = await forwardTarget(clusterOf2(), undefined, request('POST', '@g1')).then(() => undefined, (e: unknown) => e);
  t.true(isApiError(err));
  t.is((err as { status: number }).status, 404);
});

test('placement (a route\'s locate) decides where a group target goes', async (t) => {
  const member = await forwardTarget(clusterOf2(), () => 'm2', request('POST', '@g1'));
  t.is(member?.name, 'm2');
});
