/**
 * Project restrictions and limits through the HTTP API of a real daemon (full build): every
 * family's call into the policy gate (instance create, copy, edit, snapshots, backups, profiles)
 * and project config changes that would go under current use.
 */
import test from 'ava';
import { startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { callAndWait } from '../helpers/api.js';

let d: Daemon;

const ROOT = { root: { type: 'disk', path: '/', pool: 'default' } };
const q = (project: string) => `?project=${encodeURIComponent(project)}`;

async function project(name: string, config: Record<string, string>): Promise<void> {
  const res = await d.request('POST', '/1.0/projects', { name, config: { 'features.images': 'false', 'features.profiles': 'true', ...config } });
  if (res.status >= 300) throw new Error(`project ${name}: ${res.json?.error}`);
  // A new project's own default profile starts empty: give it the root disk.
  const put = await d.request('PUT', `/1.0/profiles/default${q(name)}`, { description: '', config: {}, devices: ROOT });
  if (put.status !== 200) throw new Error(`profile of ${name}: ${put.json?.error}`);
}

/** Create an empty instance; answers the synchronous refusal or the finished operation. */
const create = (p: string, name: string, config: Record<string, string> = {}, devices: Record<string, Record<string, string>> = {}) =>
  callAndWait(d, 'POST', `/1.0/instances${q(p)}`, { name, source: { type: 'none' }, config, devices });

function refusal(res: { status: number; json: any }): string {
  return `${res.status} ${res.json?.error ?? ''}`;
}

test.before(async () => {
  d = await startDaemon({ plugins: 'full', args: ['--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
});

test.after.always(async () => {
  await stopDaemons();
});

test.serial('GET /1.0 lists the restriction and limit extensions this build enforces', async (t) => {
  const extensions: string[] = (await d.request('GET', '/1.0')).json.metadata.api_extensions;
  for (const name of ['projects_limits', 'projects_restrictions', 'projects_limits_disk', 'projects_limits_instances', 'projects_restricted_cluster_target', 'projects_restricted_backups_and_snapshots']) {
    t.true(extensions.includes(name), name);
  }
});

test.serial('a restricted project refuses privileged, nested, low-level and unmanaged-device instances with a 400 naming the restriction (projects_restrictions)', async (t) => {
  await project('r1', { restricted: 'true' });
  const cases: [Record<string, string>, Record<string, Record<string, string>>, RegExp][] = [
    [{ 'security.privileged': 'true' }, {}, /privileged containers.*restricted\.containers\.privilege=unprivileged/],
    [{ 'security.nesting': 'true' }, {}, /nesting.*restricted\.containers\.nesting=block/],
    [{ 'raw.lxc': 'lxc.apparmor.profile=unconfined' }, {}, /"raw\.lxc".*restricted\.containers\.lowlevel=block/],
    [{ 'raw.idmap': 'both 1000 1000' }, {}, /"raw\.idmap"/],
    [{}, { d: { type: 'disk', source: '/tmp', path: '/mnt' } }, /storage pool.*restricted\.devices\.disk=managed/],
  ];
  for (const [config, devices, pattern] of cases) {
    const res = await create('r1', 'c1', config, devices);
    t.is(res.status, 400, refusal(res));
    t.regex(res.json.error, pattern);
  }
  t.is((await d.request('GET', `/1.0/instances${q('r1')}`)).json.metadata.length, 0, 'nothing was created');
  const ok = await create('r1', 'c1', { 'security.privileged': 'false' });
  t.is(ok.op?.status, 'Success', ok.op?.err);

  // Edits pass the same gate, synchronously.
  const patch = await d.request('PATCH', `/1.0/instances/c1${q('r1')}`, { config: { 'security.nesting': 'true' } });
  t.is(patch.status, 400, refusal(patch));
  t.regex(patch.json.error, /nesting/);

  // A project edit that would allow less than what it holds is refused; one that allows more passes.
  const tighten = await d.request('PATCH', `/1.0/projects/r1`, { config: { 'restricted.devices.disk': 'block' } });
  t.is(tighten.status, 200, refusal(tighten));
  await d.request('PATCH', `/1.0/projects/r1`, { config: { 'restricted.containers.nesting': 'allow' } });
  const nested = await d.request('PATCH', `/1.0/instances/c1${q('r1')}`, { config: { 'security.nesting': 'true' } });
  t.true(nested.status < 300, refusal(nested));
  await waitFor(async () => (await d.request('GET', `/1.0/instances/c1${q('r1')}`)).json.metadata.config['security.nesting'] === 'true', 10000, 'the edit');
  const back = await d.request('PATCH', `/1.0/projects/r1`, { config: { 'restricted.containers.nesting': 'block' } });
  t.is(back.status, 400, refusal(back));
  t.regex(back.json.error, /conflict with what it holds.*Container "c1".*nesting/);
});

test.serial('restricted.snapshots and restricted.backups refuse with 403 until allowed (projects_restricted_backups_and_snapshots)', async (t) => {
  const snap = await d.request('POST', `/1.0/instances/c1/snapshots${q('r1')}`, { name: 's0' });
  t.is(snap.status, 403, refusal(snap));
  t.regex(snap.json.error, /doesn't allow snapshots.*restricted\.snapshots=block/);
  const backup = await d.request('POST', `/1.0/instances/c1/backups${q('r1')}`, { name: 'b0' });
  t.is(backup.status, 403, refusal(backup));
  t.regex(backup.json.error, /restricted\.backups=block/);
  await d.request('PATCH', '/1.0/projects/r1', { config: { 'restricted.snapshots': 'allow' } });
  const allowed = await callAndWait(d, 'POST', `/1.0/instances/c1/snapshots${q('r1')}`, { name: 's0' });
  t.is(allowed.op?.status, 'Success', allowed.op?.err);
});

test.serial('restricted.cluster.target refuses a request naming a member (projects_restricted_cluster_target)', async (t) => {
  // A standalone server answers to its own location name, `none`; any other member name is already a 400.
  const res = await d.request('POST', `/1.0/instances${q('r1')}&target=none`, { name: 't1', source: { type: 'none' } });
  t.is(res.status, 403, refusal(res));
  t.regex(res.json.error, /restricted\.cluster\.target=block/);
  await d.request('PATCH', '/1.0/projects/r1', { config: { 'restricted.cluster.target': 'allow' } });
  const allowed = await callAndWait(d, 'POST', `/1.0/instances${q('r1')}&target=none`, { name: 't1', source: { type: 'none' } });
  t.is(allowed.op?.status, 'Success', allowed.op?.err ?? refusal(allowed));
});

test.serial('restricted.idmap.uid and restricted.idmap.gid let raw.idmap map host ids inside their ranges', async (t) => {
  await project('r2', { restricted: 'true', 'restricted.idmap.uid': '1000-1999', 'restricted.idmap.gid': '1000-1999' });
  const outside = await create('r2', 'i1', { 'raw.idmap': 'both 3000 3000' });
  t.is(outside.status, 400, refusal(outside));
  t.regex(outside.json.error, /host uids 3000 outside the allowed ranges \(restricted\.idmap\.uid=1000-1999\)/);
  const inside = await create('r2', 'i1', { 'raw.idmap': 'both 1500 1500' });
  t.is(inside.op?.status, 'Success', inside.op?.err ?? refusal(inside));
});

test.serial('restricted.networks.access is a project key (NICs must then name a listed network)', async (t) => {
  const res = await d.request('PATCH', '/1.0/projects/r2', { config: { 'restricted.networks.access': 'net1,net2' } });
  t.is(res.status, 200, refusal(res));
  t.is((await d.request('GET', '/1.0/projects/r2')).json.metadata.config['restricted.networks.access'], 'net1,net2');
});

test.serial('profiles of a restricted project are vetted on create and edit', async (t) => {
  const res = await d.request('POST', `/1.0/profiles${q('r1')}`, { name: 'dev', config: {}, devices: { tmp: { type: 'disk', source: '/tmp', path: '/mnt' } } });
  t.is(res.status, 400, refusal(res));
  t.regex(res.json.error, /Profile "dev".*other than the root disk are forbidden \(restricted\.devices\.disk=block\) on device "tmp"/);
  t.is((await d.request('GET', `/1.0/profiles/dev${q('r1')}`)).status, 404, 'nothing was written');
  const edit = await d.request('PATCH', `/1.0/profiles/default${q('r1')}`, { config: { 'security.privileged': 'true' } });
  t.is(edit.status, 400, refusal(edit));
  t.regex(edit.json.error, /privileged/);
});

test.serial('limits.containers and limits.instances count instances, copies included (projects_limits, projects_limits_instances)', async (t) => {
  await project('l1', { 'limits.containers': '1' });
  t.is((await create('l1', 'a')).op?.status, 'Success');
  const second = await create('l1', 'b');
  t.is(second.status, 400, refusal(second));
  t.regex(second.json.error, /Creating instance "b" would exceed limits\.containers of project "l1": it already has 1 containers of the 1 allowed/);
  const copy = await callAndWait(d, 'POST', `/1.0/instances${q('l1')}`, { name: 'b', source: { type: 'copy', source: 'a' } });
  t.is(copy.status, 400, refusal(copy));
  t.regex(copy.json.error, /Copying to instance "b".*limits\.containers/);
  const lower = await d.request('PATCH', '/1.0/projects/l1', { config: { 'limits.instances': '0' } });
  t.is(lower.status, 400, refusal(lower));
  t.regex(lower.json.error, /limits\.instances of project "l1" can't be 0: it already has 1 instances/);
  t.is((await d.request('PATCH', '/1.0/projects/l1', { config: { 'limits.containers': '2', 'limits.instances': '1' } })).status, 200);
  const third = await create('l1', 'b');
  t.is(third.status, 400, refusal(third));
  t.regex(third.json.error, /limits\.instances/);
});

test.serial('limits.memory, limits.cpu, limits.processes: instances must state their share and the sum stays under (projects_limits)', async (t) => {
  await project('l2', { 'limits.memory': '1GB', 'limits.cpu': '2', 'limits.processes': '100' });
  const bare = await create('l2', 'm1');
  t.is(bare.status, 400, refusal(bare));
  t.regex(bare.json.error, /Instance "m1" must set limits\.cpu \(directly or through a profile\)/);
  const share = { 'limits.memory': '512MB', 'limits.cpu': '1', 'limits.processes': '10' };
  const pct = await create('l2', 'm1', { ...share, 'limits.memory': '50%' });
  t.is(pct.status, 400);
  t.regex(pct.json.error, /absolute size, not a percentage/);
  t.is((await create('l2', 'm1', share)).op?.status, 'Success');
  const over = await create('l2', 'm2', { ...share, 'limits.memory': '600MB' });
  t.is(over.status, 400, refusal(over));
  t.regex(over.json.error, /limits\.memory of project "l2": the total would be 1\.04GiB of the 1GB allowed/);
  const grow = await d.request('PATCH', `/1.0/instances/m1${q('l2')}`, { config: { 'limits.memory': '3GB' } });
  t.is(grow.status, 400, refusal(grow));
  t.regex(grow.json.error, /Updating instance "m1" would exceed limits\.memory/);
  const low = await d.request('PATCH', '/1.0/projects/l2', { config: { 'limits.memory': '100MB' } });
  t.is(low.status, 400, refusal(low));
  t.regex(low.json.error, /limits\.memory of project "l2" can't be 100MB: its instances already use 488\.28MiB/);
  // Shares set through a profile count too.
  await d.request('PATCH', `/1.0/profiles/default${q('l2')}`, { config: { 'limits.processes': '10' } });
  const viaProfile = await create('l2', 'm2', { 'limits.memory': '400MB', 'limits.cpu': '1' });
  t.is(viaProfile.op?.status, 'Success', viaProfile.op?.err ?? refusal(viaProfile));
  const profileEdit = await d.request('PATCH', `/1.0/profiles/default${q('l2')}`, { config: { 'limits.processes': '95' } });
  t.is(profileEdit.status, 400, refusal(profileEdit));
  t.regex(profileEdit.json.error, /Changing profile "default" would exceed limits\.processes/);
});

test.serial('limits.disk counts root disk sizes (projects_limits_disk)', async (t) => {
  await project('l3', { 'limits.disk': '1GB' });
  const unsized = await create('l3', 'd1');
  t.is(unsized.status, 400);
  t.regex(unsized.json.error, /must give its root disk a size/);
  const sized = (size: string) => ({ root: { type: 'disk', path: '/', pool: 'default', size } });
  t.is((await create('l3', 'd1', {}, sized('600MB'))).op?.status, 'Success');
  const over = await create('l3', 'd2', {}, sized('500MB'));
  t.is(over.status, 400, refusal(over));
  t.regex(over.json.error, /limits\.disk of project "l3": the total would be 1\.02GiB of the 1GB allowed/);
  t.is((await d.request('PATCH', '/1.0/projects/l3', { config: { 'limits.disk': '500MB' } })).status, 400);
});
