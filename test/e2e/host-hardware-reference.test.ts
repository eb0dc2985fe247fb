/**
 * usb, gpu and infiniband option checks compared with the reference daemon (Debian lxd 5.0.2): the
 * same devices sent to an empty stopped container on both, through `lxc config device add`, must
 * be accepted or refused alike. corral refuses with 400; the reference answers a refused device
 * edit with 500 (docs/decisions/0069-host-hardware-devices.md), so the status is compared by class.
 */
import test from 'ava';
import { startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { lxc } from '../helpers/clients.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../helpers/reference-daemon.js';

const missing = referenceUnavailable();
const interop = missing ? test.skip : test.serial;
const C = 'u4hwref';
let d: Daemon;
let ref: ReferenceDaemon;

test.before(async () => {
  if (missing) return;
  d = await startWithPool({ plugins: 'full' });
  ref = await startReference();
  for (const [name, request] of [['corral', d.request], ['reference', ref.request]] as const) {
    const made = await request('POST', '/1.0/instances', { name: C, source: { type: 'none' } });
    const op = made.json?.operation ? await request('GET', `${made.json.operation}/wait?timeout=60`) : made;
    if (op.json?.metadata?.status !== 'Success') throw new Error(`${name}: empty container not made: ${op.body}`);
  }
});

test.after.always(async () => {
  await ref?.stop();
  await stopDaemons();
});

const CASES: string[][] = [
  ['usb'],
  ['usb', 'vendorid=ABCD'],
  ['usb', 'vendorid=abc'],
  ['usb', 'productid=1234', 'mode=0660', 'uid=1000'],
  ['usb', 'mode=999'],
  ['usb', 'required=maybe'],
  ['usb', 'foo=bar'],
  ['gpu'],
  ['gpu', 'gputype=foo'],
  ['gpu', 'gputype=mdev', 'mdev=x'],
  ['gpu', 'gputype=sriov'],
  ['gpu', 'gputype=mig'],
  ['gpu', 'gputype=mig', 'mig.ci=1', 'mig.gi=2'],
  ['gpu', 'gputype=mig', 'mig.uuid=abc'],
  ['gpu', 'id=0', 'pci=0000:01:00.0'],
  ['gpu', 'id=abc'],
  ['gpu', 'pci=01:00.0'],
  ['gpu', 'pci=0000:1:00.0'],
  ['gpu', 'mdev=foo'],
  ['pci', 'address=0000:01:00.0'],
  ['infiniband'],
  ['infiniband', 'nictype=physical'],
  ['infiniband', 'nictype=sriov', 'parent=ib0'],
  ['infiniband', 'nictype=physical', 'parent=ib0', 'hwaddr=00:11'],
  ['infiniband', 'nictype=physical', 'parent=ib0', 'mtu=1279'],
  ['infiniband', 'nictype=physical', 'parent=ib0', 'name=bad/name'],
];

interop('usb, gpu, pci and infiniband options: corral accepts and refuses what the reference does (400 where it refuses)', async (t) => {
  for (const args of CASES) {
    const ours = await lxc(d.socket, 'config', 'device', 'add', C, 'hw', ...args);
    const theirs = await ref.lxc('config', 'device', 'add', C, 'hw', ...args);
    t.is(ours.status === 0, theirs.status === 0, `${args.join(' ')}: corral "${ours.stderr.trim()}", reference "${theirs.stderr.trim()}"`);
    if (ours.status === 0) {
      await lxc(d.socket, 'config', 'device', 'remove', C, 'hw');
      await ref.lxc('config', 'device', 'remove', C, 'hw');
      continue;
    }
    // The same edit as a raw request: ours is a client error.
    const device = { type: args[0]!, ...Object.fromEntries(args.slice(1).map((a) => a.split('=') as [string, string])) };
    const raw = await d.request('PATCH', `/1.0/instances/${C}`, { devices: { hw: device } });
    t.is(raw.status, 400, `${args.join(' ')}: ${raw.body}`);
    const rawRef = await ref.request('PATCH', `/1.0/instances/${C}`, { devices: { hw: device } });
    t.true(rawRef.status >= 400, `${args.join(' ')}: reference ${rawRef.status}`);
  }
});
