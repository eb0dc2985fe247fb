/**
 * The NIC type conformance suite. A NIC type plugin runs it against itself from one ava test file:
 *
 *   nicTypeConformance({ nictype: 'example', plugins: ['edge', 'nic-example'], validConfig: {} });
 *
 * It loads the plugins into a test kernel as the daemon would and registers serial ava tests on
 * the real type: it is registered through the extension point and declared by its manifest, its
 * options are checked through the API, start declares an interface the instance driver can make
 * and keeps what the nic device decided, and the host-side lifecycle (started, stop) runs on a
 * real interface in a scratch network namespace and leaves nothing behind. Interface kinds the
 * suite cannot make without a parent interface are skipped, named in the test title.
 */
import test from 'ava';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  COMMON_NIC_OPTIONS, NIC_TYPE_POINT, NicTypesServiceRef,
  type DeviceRunningContext, type NicRunConfig, type NicStart, type NicType,
} from '../index.js';
import { startTestKernel, type TestKernel } from './index.js';

export interface NicTypeConformanceOptions {
  nictype: string;
  /** Plugin ids or set names to load: the set the type runs in plus its own plugin. */
  plugins: string[];
  /** Options (besides `type` and `nictype`) of a NIC of this type that validation accepts on a profile. */
  validConfig: Record<string, string>;
}

/** The interfaces an instance driver makes from a NicRunConfig (sdk/device.ts). */
const DRIVER_KINDS: NicRunConfig['kind'][] = ['veth', 'macvlan', 'phys'];

const linkExists = (name: string) => existsSync(`/sys/class/net/${name}`);
const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

export function nicTypeConformance(opts: NicTypeConformanceOptions): void {
  const title = (what: string) => `nictype ${opts.nictype} conformance: ${what}`;
  let kernel: TestKernel;
  let type: NicType;
  const config = (): Record<string, string> => ({ type: 'nic', nictype: opts.nictype, ...opts.validConfig });
  const hwaddr = `00:16:3e:${[...randomBytes(3)].map((b) => b.toString(16).padStart(2, '0')).join(':')}`;
  const starting = (): NicStart => {
    const c = config();
    return {
      project: 'default', instanceName: 'conformance', instanceType: 'container', name: 'eth7', config: c, volatile: {}, takenNicNames: [],
      parent: c.parent, vlan: c.vlan, gvrp: false, mtu: c.mtu ? Number(c.mtu) : undefined,
      nic: { name: 'eth7', kind: 'veth', hwaddr, mtu: c.mtu ? Number(c.mtu) : undefined }, changes: { name: 'eth7', hwaddr },
    };
  };

  test.before(async () => {
    kernel = await startTestKernel({ plugins: opts.plugins });
    const found = kernel.kernel.services.get(NicTypesServiceRef)?.nicType(opts.nictype);
    if (!found) throw new Error(`no nictype "${opts.nictype}" is registered by ${opts.plugins.join(', ')}`);
    type = found;
  });

  test.after.always(async () => {
    await kernel?.stop();
  });

  test.serial(title('registered through the nic-type extension point and declared by a manifest'), (t) => {
    t.is(type.nictype, opts.nictype);
    t.true(kernel.kernel.catalog.declares(NIC_TYPE_POINT, opts.nictype), `no manifest lists "${opts.nictype}" under provides.registers["${NIC_TYPE_POINT}"]`);
  });

  test.serial(title('its options are its own: not type, nictype, user.* or the common ones'), (t) => {
    for (const option of type.options) {
      t.false(['type', 'nictype', ...COMMON_NIC_OPTIONS].includes(option), option);
      t.false(option.startsWith('user.'), option);
    }
    for (const option of Object.keys(opts.validConfig)) t.true(type.options.includes(option) || (COMMON_NIC_OPTIONS as readonly string[]).includes(option), `validConfig uses "${option}", which the type does not declare`);
  });

  test.serial(title('a profile takes a valid NIC and refuses an unknown option, naming it'), async (t) => {
    const name = `conf${randomBytes(3).toString('hex')}`;
    const good = await kernel.inject({ method: 'POST', url: '/1.0/profiles', payload: { name, devices: { eth7: config() } } });
    t.true(good.statusCode < 300, good.body);
    const bad = await kernel.inject({ method: 'PUT', url: `/1.0/profiles/${name}`, payload: { devices: { eth7: { ...config(), conformance_bogus: '1' } } } });
    t.is(bad.statusCode, 400, bad.body);
    t.regex(bad.json?.error ?? '', /conformance_bogus/);
    const kept = await kernel.inject({ url: `/1.0/profiles/${name}` });
    t.deepEqual(kept.json.metadata.devices, { eth7: config() });
    await kernel.inject({ method: 'DELETE', url: `/1.0/profiles/${name}` });
  });

  test.serial(title('start declares an interface the instance driver makes, keeping its name and MAC address'), async (t) => {
    const s = starting();
    await type.start(s);
    t.true(DRIVER_KINDS.includes(s.nic.kind), `kind "${s.nic.kind}"`);
    t.is(s.nic.name, 'eth7');
    if (!type.keepsHwaddr) t.is(s.nic.hwaddr, hwaddr);
    for (const [key, value] of Object.entries(s.changes)) t.is(typeof value, 'string', key);
    if (s.nic.kind === 'veth') {
      t.truthy(s.nic.hostName, 'a veth NIC names its host end');
      t.false(linkExists(s.nic.hostName!), 'the instance driver makes the pair, not start');
    } else {
      t.truthy(s.nic.link, `a ${s.nic.kind} NIC names its host interface`);
    }
    await type.stop?.({ ...s, volatile: s.changes });
  });

  /** A process in a network namespace of its own, standing in for the instance's init. */
  const scratchInstance = (): ChildProcess => spawn('unshare', ['--net', 'sleep', '60'], { stdio: 'ignore' });

  test.serial(title('started and stop on a real interface in a scratch namespace leave nothing behind'), async (t) => {
    const s = starting();
    await type.start(s);
    if (s.nic.kind !== 'veth') {
      t.pass(`kind ${s.nic.kind} needs a parent interface: not exercised here`);
      await type.stop?.({ ...s, volatile: s.changes });
      return;
    }
    const hostName = s.nic.hostName!;
    const peer = `cf${randomBytes(5).toString('hex')}`;
    const instance = scratchInstance();
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      ip('link', 'add', hostName, 'type', 'veth', 'peer', 'name', peer);
      ip('link', 'set', peer, 'netns', String(instance.pid));
      ip('link', 'set', hostName, 'up');
      if (s.nic.link) ip('link', 'set', hostName, 'master', s.nic.link);
      const running: DeviceRunningContext = { ...s, volatile: s.changes, pid: instance.pid!, run: { device: s.name, nics: [s.nic], volatile: s.changes } };
      await type.started?.(running);
      t.true(linkExists(hostName));
    } finally {
      // The instance stops: its namespace goes and the pair with it.
      instance.kill('SIGKILL');
      await new Promise((resolve) => instance.once('exit', resolve));
    }
    for (let i = 0; i < 50 && linkExists(hostName); i++) await new Promise((resolve) => setTimeout(resolve, 100));
    const changes = await type.stop?.({ ...s, volatile: s.changes });
    for (const [key, value] of Object.entries(changes ?? {})) t.is(typeof value, 'string', key);
    t.false(linkExists(hostName), 'the host end is gone');
  });
}
