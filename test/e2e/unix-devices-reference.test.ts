/**
 * unix-char devices on corral and on the reference daemon side by side, through the real `lxc`
 * client: what each accepts on a stopped instance, how a start with a missing required source
 * fails, what a refused option does, and the node a running container gets (type, numbers, mode,
 * owner inside). Statuses differ on purpose: the reference answers 500 to a bad option, corral 400.
 */
import test from 'ava';
import { rmSync } from 'node:fs';
import { lxc, type ClientRun } from '../helpers/clients.js';
import { startWithImage, stopImageDaemons, type ImageDaemon } from '../helpers/image-daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../helpers/reference-daemon.js';

const missing = referenceUnavailable();
const interop = missing ? test.skip : test.serial;

let d: ImageDaemon;
let ref: ReferenceDaemon;
let image: BusyboxImage;

type Side = { name: string; lxc: (...args: string[]) => Promise<ClientRun>; request: ReferenceDaemon['request'] };
const sides = (): Side[] => [
  { name: 'corral', lxc: (...a) => lxc(d.socket, ...a), request: (...a) => d.request(...a) },
  { name: 'reference', lxc: (...a) => ref.lxc(...a), request: (...a) => ref.request(...a) },
];

test.before(async () => {
  if (missing) return;
  image = buildBusyboxImage('gzip');
  [d, ref] = await Promise.all([startWithImage({ plugins: 'full' }), startReference()]);
  const imported = await ref.lxc('image', 'import', image.unified, '--alias', 'bb');
  if (imported.status !== 0) throw new Error(`reference image import failed: ${imported.stderr}`);
});

test.after.always(async () => {
  if (missing) return;
  await ref?.stop();
  await stopImageDaemons();
  rmSync(image.dir, { recursive: true, force: true });
});

interop('both accept a missing required source on a stopped instance and fail its start naming the device', async (t) => {
  for (const s of sides()) {
    t.is((await s.lxc('init', 'bb', 'u1ref')).status, 0, s.name);
    const added = await s.lxc('config', 'device', 'add', 'u1ref', 'gone', 'unix-char', 'source=/dev/u1-absent');
    t.is(added.status, 0, `${s.name}: ${added.stderr}`);
    const started = await s.lxc('start', 'u1ref');
    t.not(started.status, 0, s.name);
    t.regex(started.stderr, /"gone"/, s.name);
    t.is((await s.lxc('config', 'device', 'remove', 'u1ref', 'gone')).status, 0, s.name);
  }
});

interop('both refuse an unknown option and a bad mode, and leave the devices as they were', async (t) => {
  for (const s of sides()) {
    for (const device of [{ type: 'unix-char', source: '/dev/null', bogus: '1' }, { type: 'unix-char', source: '/dev/null', mode: 'abc' }]) {
      const res = await s.request('PATCH', '/1.0/instances/u1ref', { devices: { bad: device } });
      t.true(res.status >= 400, `${s.name}: ${res.status}`);
      t.is(res.status, s.name === 'corral' ? 400 : res.status);
      t.is((await s.request('GET', '/1.0/instances/u1ref')).json.metadata.devices.bad, undefined, s.name);
    }
  }
});

interop('a unix-char device added to a running container looks the same inside on both', async (t) => {
  const seen: string[] = [];
  for (const s of sides()) {
    const started = await s.lxc('start', 'u1ref');
    t.is(started.status, 0, `${s.name}: ${started.stderr}`);
    t.is((await s.lxc('config', 'device', 'add', 'u1ref', 'n', 'unix-char', 'source=/dev/null', 'path=/dev/mynull', 'uid=1000', 'mode=0640')).status, 0, s.name);
    seen.push((await s.lxc('exec', 'u1ref', '--', 'stat', '-c', '%F %t:%T %a %u:%g', '/dev/mynull')).stdout.trim());
    t.is((await s.lxc('config', 'device', 'remove', 'u1ref', 'n')).status, 0, s.name);
    t.not((await s.lxc('exec', 'u1ref', '--', 'ls', '/dev/mynull')).status, 0, s.name);
    await s.lxc('delete', '--force', 'u1ref');
  }
  t.is(seen[0], 'character special file 1:3 640 1000:0');
  t.is(seen[0], seen[1]);
});
