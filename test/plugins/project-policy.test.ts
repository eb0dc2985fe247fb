/**
 * The project policy as pure functions: every `restricted.*` key and every `limits.*` key, on
 * instance, profile, snapshot, backup and volume proposals, and on project config changes.
 * Expected outcomes were checked against the reference daemon where it has the same rule.
 */
import test, { type ExecutionContext } from 'ava';
import { ApiError, type DeviceConfig, type InstanceProposal, type ProjectProposal } from '../../sdk/index.js';
import { emptyContents, vetProjectConfig, vetProposal, type InstanceEntry, type ProjectContents } from '../../plugins/projects/policy/index.js';

const ROOT = { root: { type: 'disk', path: '/', pool: 'default' } };

function inst(name: string, config: Record<string, string> = {}, devices: Record<string, DeviceConfig> = {}, extra: Partial<InstanceProposal> = {}): InstanceProposal {
  return { kind: 'instance', action: 'create', project: 'p', name, type: 'container', config, devices: { ...ROOT, ...devices }, ...extra };
}

function entry(name: string, config: Record<string, string> = {}, devices: Record<string, DeviceConfig> = {}, type: InstanceEntry['type'] = 'container', profiles: string[] = []): InstanceEntry {
  const all = { ...ROOT, ...devices };
  return { name, type, config, devices: all, profiles, own: { config, devices: all } };
}

const holding = (...instances: InstanceEntry[]): ProjectContents => ({ ...emptyContents(), instances });

function refused(t: ExecutionContext, config: Record<string, string>, proposal: ProjectProposal, pattern: RegExp, contents = emptyContents(), status: ApiError['status'] = 400): void {
  const err = t.throws(() => vetProposal('p', config, contents, proposal));
  t.true(err instanceof ApiError, `${err?.message}`);
  t.is((err as ApiError).status, status);
  t.regex(err!.message, pattern);
}

function allowed(t: ExecutionContext, config: Record<string, string>, proposal: ProjectProposal, contents = emptyContents()): void {
  t.notThrows(() => vetProposal('p', config, contents, proposal));
}

const R = { restricted: 'true' };

test('an unrestricted project ignores the restricted.* keys', (t) => {
  allowed(t, { 'restricted.containers.nesting': 'block' }, inst('c', { 'security.privileged': 'true', 'security.nesting': 'true', 'raw.lxc': 'x' }, { d: { type: 'unix-char', path: '/dev/null' } }));
  allowed(t, { restricted: 'false' }, { kind: 'snapshot', project: 'p', instance: 'c' });
});

test('restricted.containers.nesting', (t) => {
  refused(t, R, inst('c', { 'security.nesting': 'true' }), /nesting.*restricted\.containers\.nesting=block/);
  allowed(t, R, inst('c', { 'security.nesting': 'false' }));
  allowed(t, { ...R, 'restricted.containers.nesting': 'allow' }, inst('c', { 'security.nesting': 'true' }));
});

test('restricted.containers.privilege: unprivileged, isolated, allow', (t) => {
  refused(t, R, inst('c', { 'security.privileged': 'true' }), /Container "c" of restricted project "p": privileged containers.*restricted\.containers\.privilege=unprivileged/);
  allowed(t, R, inst('c', { 'security.privileged': 'false' }));
  const isolated = { ...R, 'restricted.containers.privilege': 'isolated' };
  refused(t, isolated, inst('c'), /security\.idmap\.isolated=true/);
  refused(t, isolated, inst('c', { 'security.idmap.isolated': 'true', 'security.privileged': 'true' }), /privileged/);
  allowed(t, isolated, inst('c', { 'security.idmap.isolated': 'true' }));
  // A profile need not say it, but may not switch it off.
  allowed(t, isolated, { kind: 'profile', project: 'p', name: 'pr', config: {}, devices: {} });
  refused(t, isolated, { kind: 'profile', project: 'p', name: 'pr', config: { 'security.idmap.isolated': 'false' }, devices: {} }, /Profile "pr"/);
  allowed(t, { ...R, 'restricted.containers.privilege': 'allow' }, inst('c', { 'security.privileged': 'true' }));
  // Virtual machines have no container privilege to restrict.
  allowed(t, isolated, inst('v', {}, {}, { type: 'virtual-machine' }));
});

test('restricted.containers.lowlevel', (t) => {
  for (const key of ['raw.lxc', 'raw.apparmor', 'raw.seccomp', 'linux.kernel_modules', 'boot.host_shutdown_timeout', 'security.idmap.base', 'security.idmap.size', 'security.devlxd.images']) {
    refused(t, R, inst('c', { [key]: 'false' }), new RegExp(`low-level key "${key.replace(/\./g, '\\.')}".*restricted\\.containers\\.lowlevel=block`));
  }
  allowed(t, R, inst('c', { 'limits.kernel.nofile': '10', 'security.devlxd': 'false', 'security.syscalls.deny_default': 'false' }));
  allowed(t, { ...R, 'restricted.containers.lowlevel': 'allow' }, inst('c', { 'raw.lxc': 'lxc.x=1', 'raw.idmap': 'both 5000 5000' }));
});

test('restricted.idmap.uid and restricted.idmap.gid bound raw.idmap', (t) => {
  refused(t, R, inst('c', { 'raw.idmap': 'both 1500 1500' }), /raw\.idmap.*restricted\.containers\.lowlevel/);
  const ranged = { ...R, 'restricted.idmap.uid': '1000-2000', 'restricted.idmap.gid': '1000-2000,3000' };
  allowed(t, ranged, inst('c', { 'raw.idmap': 'both 1500 1500\nuid 1500-1600 2500-2600\ngid 3000 0' }));
  refused(t, ranged, inst('c', { 'raw.idmap': 'uid 3000 3000' }), /host uids 3000 outside.*restricted\.idmap\.uid=1000-2000/);
  refused(t, ranged, inst('c', { 'raw.idmap': 'gid 999 999' }), /host gids 999.*restricted\.idmap\.gid/);
  refused(t, ranged, inst('c', { 'raw.idmap': 'both 1900-2100 0-200' }), /1900-2100/);
  refused(t, { ...R, 'restricted.idmap.uid': '1000-2000' }, inst('c', { 'raw.idmap': 'both 1500 1500' }), /restricted\.idmap\.gid=unset/);
  refused(t, ranged, inst('c', { 'raw.idmap': 'nonsense' }), /Invalid raw\.idmap line/);
});

test('restricted.containers.interception: block, allow, full', (t) => {
  refused(t, R, inst('c', { 'security.syscalls.intercept.mknod': 'true' }), /interception.*restricted\.containers\.interception=block/);
  allowed(t, R, inst('c', { 'security.syscalls.intercept.mknod': 'false' }));
  const allow = { ...R, 'restricted.containers.interception': 'allow' };
  allowed(t, allow, inst('c', { 'security.syscalls.intercept.mknod': 'true', 'security.syscalls.intercept.setxattr': 'true', 'security.syscalls.intercept.bpf': 'true' }));
  refused(t, allow, inst('c', { 'security.syscalls.intercept.mount.allowed': 'ext4' }), /needs restricted\.containers\.interception=full/);
  refused(t, allow, inst('c', { 'security.syscalls.intercept.sysinfo': 'true' }), /interception=full/);
  allowed(t, { ...R, 'restricted.containers.interception': 'full' }, inst('c', { 'security.syscalls.intercept.mount.allowed': 'ext4', 'security.syscalls.intercept.mknod': 'true' }));
});

test('restricted.virtual-machines.lowlevel', (t) => {
  const vm = (config: Record<string, string>) => inst('v', config, {}, { type: 'virtual-machine' });
  for (const key of ['raw.qemu', 'raw.qemu.conf', 'raw.apparmor', 'limits.memory.hugepages', 'boot.host_shutdown_timeout']) {
    refused(t, R, vm({ [key]: '1' }), new RegExp(`Virtual machine "v".*"${key.replace(/\./g, '\\.')}".*restricted\\.virtual-machines\\.lowlevel=block`));
  }
  allowed(t, R, vm({ 'security.secureboot': 'false', 'raw.lxc': 'x' }));
  allowed(t, { ...R, 'restricted.virtual-machines.lowlevel': 'allow' }, vm({ 'raw.qemu': '-S' }));
  // A profile may apply to either type, so both sets of low-level keys apply to it.
  refused(t, R, { kind: 'profile', project: 'p', name: 'pr', config: { 'raw.qemu': '-S' }, devices: {} }, /Profile "pr".*virtual-machines\.lowlevel/);
});

test('restricted.devices.<type> for the blockable device types', (t) => {
  const devices: Record<string, DeviceConfig> = {
    'unix-char': { type: 'unix-char', path: '/dev/null' }, 'unix-block': { type: 'unix-block', path: '/dev/loop0' },
    'unix-hotplug': { type: 'unix-hotplug' }, infiniband: { type: 'infiniband', nictype: 'physical', parent: 'x' },
    gpu: { type: 'gpu' }, usb: { type: 'usb' }, pci: { type: 'pci', address: '0000:00:00.0' },
    proxy: { type: 'proxy', listen: 'tcp:127.0.0.1:1', connect: 'tcp:127.0.0.1:2' },
  };
  for (const [type, dev] of Object.entries(devices)) {
    refused(t, R, inst('c', {}, { d: dev }), new RegExp(`forbidden \\(restricted\\.devices\\.${type}=block\\) on device "d"`));
    allowed(t, { ...R, [`restricted.devices.${type}`]: 'allow' }, inst('c', {}, { d: dev }));
  }
  allowed(t, R, inst('c', {}, { t: { type: 'tpm', path: '/dev/tpm0' }, n: { type: 'none' } }));
});

test('restricted.devices.nic and restricted.networks.access', (t) => {
  const bridged = { type: 'nic', nictype: 'bridged', parent: 'br0' };
  const managed = { type: 'nic', network: 'net1' };
  refused(t, R, inst('c', {}, { eth0: bridged }), /managed network.*restricted\.devices\.nic=managed\) on device "eth0"/);
  allowed(t, R, inst('c', {}, { eth0: managed }));
  refused(t, { ...R, 'restricted.devices.nic': 'block' }, inst('c', {}, { eth0: managed }), /network devices are forbidden/);
  allowed(t, { ...R, 'restricted.devices.nic': 'allow' }, inst('c', {}, { eth0: bridged }));
  const access = { ...R, 'restricted.networks.access': 'net2, net3' };
  refused(t, access, inst('c', {}, { eth0: managed }), /network "net1" is not one this project may use \(restricted\.networks\.access=net2, net3\)/);
  allowed(t, access, inst('c', {}, { eth0: { type: 'nic', network: 'net3' } }));
  refused(t, { ...access, 'restricted.devices.nic': 'allow' }, inst('c', {}, { eth0: bridged }), /must name one of the networks/);
});

test('restricted.devices.disk and restricted.devices.disk.paths', (t) => {
  const host = (source: string) => ({ d: { type: 'disk', source, path: '/mnt' } });
  refused(t, R, inst('c', {}, host('/tmp')), /backed by a storage pool.*restricted\.devices\.disk=managed/);
  allowed(t, R, inst('c', {}, { d: { type: 'disk', pool: 'default', source: 'vol', path: '/mnt' } }));
  const block = { ...R, 'restricted.devices.disk': 'block' };
  refused(t, block, inst('c', {}, { d: { type: 'disk', pool: 'default', source: 'vol', path: '/mnt' } }), /disk devices other than the root disk are forbidden \(restricted\.devices\.disk=block\)/);
  allowed(t, block, inst('c'));
  const allow = { ...R, 'restricted.devices.disk': 'allow' };
  allowed(t, allow, inst('c', {}, host('/etc')));
  const paths = { ...allow, 'restricted.devices.disk.paths': '/tmp,/srv/a/' };
  allowed(t, paths, inst('c', {}, host('/tmp')));
  allowed(t, paths, inst('c', {}, host('/srv/a/b/c')));
  refused(t, paths, inst('c', {}, host('/tmpx')), /source path "\/tmpx" is outside the allowed paths \(restricted\.devices\.disk\.paths=/);
  refused(t, paths, inst('c', {}, host('/srv/a/../../etc')), /outside the allowed paths/);
  refused(t, paths, inst('c', {}, host('/etc')), /outside/);
});

test('restricted.snapshots, restricted.backups: 403 unless allowed', (t) => {
  for (const kind of ['snapshot', 'backup'] as const) {
    refused(t, R, { kind, project: 'p', instance: 'c' }, new RegExp(`doesn't allow ${kind}s.*restricted\\.${kind}s=block`), emptyContents(), 403);
    allowed(t, { ...R, [`restricted.${kind}s`]: 'allow' }, { kind, project: 'p', instance: 'c' });
  }
});

test('restricted.cluster.target: a request naming a member is refused unless allowed', (t) => {
  refused(t, R, inst('c', {}, {}, { target: 'node1' }), /cluster member.*restricted\.cluster\.target=block/, emptyContents(), 403);
  allowed(t, R, inst('c'));
  allowed(t, { ...R, 'restricted.cluster.target': 'allow' }, inst('c', {}, {}, { target: 'node1' }));
});

test('a profile edit is checked against the instances that use it, as they would expand', (t) => {
  const user = entry('c1', {}, {}, 'container', ['default', 'extra']);
  const contents: ProjectContents = { ...holding(user), profiles: [{ name: 'default', config: {}, devices: ROOT }, { name: 'extra', config: {}, devices: {} }] };
  const isolated = { ...R, 'restricted.containers.privilege': 'isolated', 'limits.memory': '1GB' };
  // The instance sets neither key itself: the profile's content decides.
  refused(t, isolated, { kind: 'profile', project: 'p', name: 'extra', config: { 'limits.memory': '2GB', 'security.idmap.isolated': 'true' }, devices: {} }, /Changing profile "extra" would exceed limits\.memory/, contents);
  allowed(t, isolated, { kind: 'profile', project: 'p', name: 'extra', config: { 'limits.memory': '512MB', 'security.idmap.isolated': 'true' }, devices: {} }, contents);
  refused(t, isolated, { kind: 'profile', project: 'p', name: 'extra', config: { 'limits.memory': '512MB' }, devices: {} }, /Container "c1".*security\.idmap\.isolated=true/, contents);
  // A profile nobody uses only has to respect the restrictions.
  allowed(t, { 'limits.memory': '1GB' }, { kind: 'profile', project: 'p', name: 'other', config: {}, devices: {} }, contents);
});

test('limits.instances, limits.containers, limits.virtual-machines count instances', (t) => {
  const two = holding(entry('a'), entry('v', {}, {}, 'virtual-machine'));
  refused(t, { 'limits.instances': '2' }, inst('c'), /Creating instance "c" would exceed limits\.instances of project "p": it already has 2 instances of the 2 allowed/, two);
  allowed(t, { 'limits.instances': '3' }, inst('c'), two);
  refused(t, { 'limits.containers': '1' }, inst('c', {}, {}, { action: 'copy' }), /Copying to instance "c" would exceed limits\.containers.*1 containers/, two);
  allowed(t, { 'limits.containers': '1' }, inst('v2', {}, {}, { type: 'virtual-machine' }), holding(entry('a')));
  refused(t, { 'limits.virtual-machines': '1' }, inst('v2', {}, {}, { type: 'virtual-machine', action: 'import' }), /Importing instance "v2".*limits\.virtual-machines.*1 virtual machines/, two);
  refused(t, { 'limits.instances': '0' }, inst('c', {}, {}, { action: 'move' }), /Moving in instance "c"/);
  // An update or a rename in place does not add an instance.
  allowed(t, { 'limits.instances': '2' }, inst('a', { 'user.x': '1' }, {}, { action: 'update' }), two);
  allowed(t, { 'limits.instances': '2' }, inst('b', {}, {}, { action: 'move', replaces: 'a' }), two);
});

test('limits.cpu, limits.memory, limits.processes: every instance states its share and the sum stays under', (t) => {
  const config = { 'limits.cpu': '2', 'limits.memory': '1GB', 'limits.processes': '100' };
  const full = { 'limits.cpu': '1', 'limits.memory': '500MB', 'limits.processes': '10' };
  refused(t, config, inst('c', { 'limits.memory': '512MB', 'limits.processes': '10' }), /Instance "c" must set limits\.cpu \(directly or through a profile\) because project "p" sets limits\.cpu/);
  refused(t, config, inst('c', { ...full, 'limits.cpu': '0-1' }), /limits\.cpu as a number of CPUs, not pinned CPUs \("0-1"\)/);
  refused(t, config, inst('c', { ...full, 'limits.memory': '50%' }), /absolute size, not a percentage \("50%"\)/);
  refused(t, config, inst('c', { ...full, 'limits.memory': 'lots' }), /invalid limits\.memory/);
  allowed(t, config, inst('c', full));
  const one = holding(entry('a', full));
  allowed(t, config, inst('c', full), one);
  refused(t, config, inst('c', { ...full, 'limits.memory': '600MB' }), /would exceed limits\.memory of project "p": the total would be 1\.02GiB of the 1GB allowed/, one);
  refused(t, config, inst('c', { ...full, 'limits.cpu': '2' }), /limits\.cpu of project "p": the total would be 3 of the 2 allowed/, one);
  refused(t, config, inst('c', { ...full, 'limits.processes': '91' }), /limits\.processes.*101 of the 100/, one);
  // Updating an instance replaces its own share instead of adding to it.
  allowed(t, config, inst('a', { ...full, 'limits.memory': '1GB', 'limits.cpu': '2' }, {}, { action: 'update' }), one);
  refused(t, config, inst('a', { ...full, 'limits.memory': '3GB' }, {}, { action: 'update' }), /Updating instance "a" would exceed limits\.memory/, one);
  // Another instance lacking its share (made before the limit) is named.
  refused(t, config, inst('c', full), /Instance "old" must set limits\.cpu/, holding(entry('old')));
});

test('limits.disk counts root disk sizes and custom volume sizes, not images', (t) => {
  const config = { 'limits.disk': '3GB' };
  const sized = (size: string) => ({ root: { type: 'disk', path: '/', pool: 'default', size } });
  refused(t, config, inst('c'), /Instance "c" must give its root disk a size/);
  allowed(t, config, inst('c', {}, sized('3GB')));
  const contents: ProjectContents = { ...holding(entry('a', {}, sized('2GB'))), volumes: [{ pool: 'default', name: 'v1', size: '500MB' }] };
  allowed(t, config, inst('c', {}, sized('500MB')), contents);
  refused(t, config, inst('c', {}, sized('501MB')), /limits\.disk of project "p": the total would be 2\.79GiB of the 3GB allowed/, contents);
  allowed(t, config, { kind: 'volume', project: 'p', pool: 'default', name: 'v2', size: 400e6 }, contents);
  refused(t, config, { kind: 'volume', project: 'p', pool: 'default', name: 'v2', size: 1e9 }, /Creating volume "v2" would exceed limits\.disk/, contents);
  refused(t, config, { kind: 'volume', project: 'p', pool: 'default', name: 'v2' }, /Custom volume "v2" on pool "default" must have a size/, contents);
  allowed(t, {}, { kind: 'volume', project: 'p', pool: 'default', name: 'v2' }, contents);
});

test('a project config change may not put a limit under what is used', (t) => {
  const full = { 'limits.cpu': '1', 'limits.memory': '512MB', 'limits.processes': '10' };
  const contents: ProjectContents = { ...holding(entry('a', full), entry('b', full, { root: { type: 'disk', path: '/', pool: 'default', size: '1GB' } })), networks: 2 };
  const change = (after: Record<string, string>, before: Record<string, string> = {}) => () => vetProjectConfig('p', before, after, contents);
  t.throws(change({ 'limits.containers': '1' }), { message: /limits\.containers of project "p" can't be 1: it already has 2 containers/ });
  t.throws(change({ 'limits.instances': '1' }), { message: /limits\.instances.*2 instances/ });
  t.notThrows(change({ 'limits.virtual-machines': '0' }));
  t.throws(change({ 'limits.memory': '1000MB' }), { message: /limits\.memory of project "p" can't be 1000MB: its instances already use 976\.56MiB/ });
  t.notThrows(change({ 'limits.memory': '1024MB' }));
  t.throws(change({ 'limits.cpu': '1' }), { message: /limits\.cpu.*already use 2/ });
  t.throws(change({ 'limits.processes': '19' }), { message: /limits\.processes/ });
  t.throws(change({ 'limits.disk': '10GB' }), { message: /Instance "a" must give its root disk a size/ });
  t.throws(change({ 'limits.networks': '1' }), { message: /limits\.networks.*2 networks/ });
  t.throws(change({ 'limits.memory': '50%' }), { message: /Invalid limits\.memory "50%"/ });
  // Unchanged keys are not weighed again.
  t.notThrows(change({ 'limits.containers': '1', description: 'x' }, { 'limits.containers': '1' }));
  t.throws(change({ restricted: 'true' }), { message: /own profiles \(features\.profiles=true\)/ });
});

test('a project config change may not restrict what its instances and profiles already use', (t) => {
  const contents: ProjectContents = {
    ...holding(entry('c1', { 'security.nesting': 'true' })),
    profiles: [{ name: 'pr', config: {}, devices: { d: { type: 'unix-char', path: '/dev/null' } } }],
  };
  const base = { 'features.profiles': 'true' };
  t.throws(() => vetProjectConfig('p', base, { ...base, restricted: 'true', 'restricted.devices.unix-char': 'allow' }, contents),
    { message: /The new restrictions of project "p" conflict with what it holds: Container "c1".*nesting/ });
  t.throws(() => vetProjectConfig('p', base, { ...base, restricted: 'true', 'restricted.containers.nesting': 'allow' }, contents),
    { message: /Profile "pr".*Unix character devices/ });
  t.notThrows(() => vetProjectConfig('p', base, { ...base, restricted: 'true', 'restricted.containers.nesting': 'allow', 'restricted.devices.unix-char': 'allow' }, contents));
});
