/**
 * The test kit itself: a test kernel whose host-tools service is the recording fake (what the
 * bridge plugin would run is recorded, nothing reaches the host) and whose services a test can
 * stand in for, whatever plugin provides them.
 */
import test from 'ava';
import { existsSync } from 'node:fs';
import {
  InstancesServiceRef, WarningsServiceRef, type InstanceSummary, type InstancesService, type WarningInput, type WarningsService,
} from '../../sdk/index.js';
import { createFakeHostTools, serviceOverride, startTestKernel, type FakeHostTools } from '../../sdk/testing/index.js';

/** A fake host on which `ip -j ...` lists nothing and the nftables table does not exist yet. */
function quietHost(): FakeHostTools {
  return createFakeHostTools()
    .answer('ip', { stdout: '[]' }, (args) => args[0] === '-j')
    .answer('nft', { exitCode: 1, stderr: 'Error: No such file or directory' }, ['-j', 'list']);
}

const bridge = (name: string) => ({
  name, type: 'bridge',
  config: { 'ipv4.address': '10.254.77.1/24', 'ipv4.nat': 'false', 'ipv4.dhcp': 'false', 'ipv6.address': 'none', 'dns.mode': 'none' },
});

test.serial('the fake host tools record what the bridge plugin would run, and nothing reaches the host', async (t) => {
  const tools = quietHost();
  const k = await startTestKernel({ plugins: 'networks,network-bridge', hostTools: tools });
  try {
    const res = await k.inject({ method: 'POST', url: '/1.0/networks', payload: bridge('kitbr0') });
    t.is(res.statusCode, 200, res.body);
    const batch = tools.calls.find((c) => c.command === 'ip' && c.args.join(' ') === '-batch -');
    t.truthy(batch, tools.commandLines().join('\n'));
    t.true(batch!.input!.split('\n').includes('link add name kitbr0 type bridge'), batch!.input);
    t.true(batch!.input!.includes('addr add 10.254.77.1/24 dev kitbr0'), batch!.input);
    t.true(tools.calls.some((c) => c.command.endsWith('nft') && c.args.join(' ') === '-f -' && c.input!.includes('add chain inet corral_') && c.input!.includes('iifname "kitbr0"')), tools.commandLines('nft').join('\n'));
    t.false(tools.calls.some((c) => c.command === 'dnsmasq'), 'no DHCP or DNS asked for, so no dnsmasq');
    t.false(existsSync('/sys/class/net/kitbr0'), 'the fake ran nothing on the host');

    tools.clear();
    t.is((await k.inject({ method: 'DELETE', url: '/1.0/networks/kitbr0' })).statusCode, 200);
    t.true(tools.commandLines('nft').length > 0, 'the delete takes the rules down');
  } finally {
    await k.stop();
  }
});

test.serial('a failure the test answers with reaches the client as the plugin reports it, and the create is undone', async (t) => {
  const tools = quietHost().answer('ip', { exitCode: 2, stderr: 'RTNETLINK answers: Operation not permitted' }, ['-batch']);
  const k = await startTestKernel({ plugins: 'networks,network-bridge', hostTools: tools });
  try {
    const res = await k.inject({ method: 'POST', url: '/1.0/networks', payload: bridge('kitbr1') });
    t.is(res.statusCode, 400, res.body);
    t.regex(res.json.error, /Operation not permitted/);
    t.is((await k.inject({ url: '/1.0/networks/kitbr1' })).statusCode, 404);
  } finally {
    await k.stop();
  }
});

test.serial('a plugin that needs a tool the fake host lacks is refused at start, naming the tool', async (t) => {
  const tools = createFakeHostTools({ installed: ['ip', 'nft'] });
  const err = await t.throwsAsync(startTestKernel({ plugins: 'networks,network-bridge', hostTools: tools }));
  t.regex(err!.message, /network-bridge needs "dnsmasq", which is not installed/);
});

test.serial('a service override is what consumers get: the networks family sees the stand-in instances', async (t) => {
  const instance: InstanceSummary = {
    project: 'default', name: 'c1', type: 'container', profiles: ['default'], config: {}, devices: {},
    expandedConfig: {}, expandedDevices: { eth0: { type: 'nic', network: 'kitbr2', name: 'eth0' } },
  };
  const instances: InstancesService = {
    registerDriver: () => undefined,
    registerDeviceType: () => undefined,
    list: async (project) => (project === undefined || project === 'default' ? [instance] : []),
    metrics: async () => [],
  };
  const k = await startTestKernel({ plugins: 'networks,network-bridge', hostTools: quietHost(), services: [serviceOverride(InstancesServiceRef, instances)] });
  try {
    t.is((await k.inject({ method: 'POST', url: '/1.0/networks', payload: bridge('kitbr2') })).statusCode, 200);
    const res = await k.inject({ url: '/1.0/networks/kitbr2' });
    t.is(res.statusCode, 200, res.body);
    t.deepEqual(res.json.metadata.used_by, ['/1.0/instances/c1']);
    // Deleting a network something uses is refused, by what the stand-in says.
    t.is((await k.inject({ method: 'DELETE', url: '/1.0/networks/kitbr2' })).statusCode, 400);
  } finally {
    await k.stop();
  }
});

test.serial('an override wins over the plugin that provides the same service', async (t) => {
  const raised: WarningInput[] = [];
  const recorder: WarningsService = { raise: async (w) => { raised.push(w); }, resolve: async () => undefined };
  const k = await startTestKernel({ plugins: 'warnings', services: [serviceOverride(WarningsServiceRef, recorder)] });
  try {
    t.is(k.kernel.services.get(WarningsServiceRef), recorder);
    await k.kernel.services.get(WarningsServiceRef)!.raise({ type: 'Test', message: 'recorded' });
    t.deepEqual(raised.map((w) => w.message), ['recorded']);
    // The plugin still serves its routes, from its own store: the stand-in took its place only for consumers.
    const res = await k.inject({ url: '/1.0/warnings' });
    t.is(res.statusCode, 200);
    t.deepEqual(res.json.metadata, []);
  } finally {
    await k.stop();
  }
});

test('the fake answers run and spawn alike: output, exit code, and a failure thrown as the real service throws it', async (t) => {
  const tools = createFakeHostTools()
    .answer('lxc-info', { stdout: 'State: RUNNING' }, ['-n', 'c1'])
    .answer('/usr/bin/false', { exitCode: 1, stderr: 'nope' })
    .answer('sh', (call) => ({ stdout: `ran ${call.args.join(' ')}`, exitCode: 3 }));
  t.is((await tools.run('/usr/bin/lxc-info', ['-n', 'c1', '-s'])).stdout, 'State: RUNNING');
  t.is((await tools.run('lxc-info', ['-n', 'c2'])).stdout, '', 'unanswered: success with no output');
  const err = await t.throwsAsync(tools.run('/usr/bin/false', []));
  t.regex(err!.message, /false failed \(exit 1\): nope/);
  t.is((await tools.run('/usr/bin/false', [], { allowFailure: true })).exitCode, 1);

  const child = tools.spawn('sh', ['-c', 'echo hi']);
  const chunks: Buffer[] = [];
  child.stdout.on('data', (c: Buffer) => chunks.push(c));
  t.is(await child.exited, 3);
  t.is(Buffer.concat(chunks).toString(), 'ran -c echo hi');
  t.deepEqual(tools.commandLines(), ['/usr/bin/lxc-info -n c1 -s', 'lxc-info -n c2', '/usr/bin/false', '/usr/bin/false', 'sh -c echo hi']);
  t.deepEqual(tools.calls.map((c) => c.kind), ['run', 'run', 'run', 'run', 'spawn']);
});
