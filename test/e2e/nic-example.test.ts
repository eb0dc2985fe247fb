/**
 * The out-of-tree NIC type (examples/nic-example) through the real `lxc` client: with the example
 * in the build, `lxc config device add` of a `nictype=example` NIC hot-plugs it into a running
 * container (the interface inside, its host end labelled, gone when removed); without it, the same
 * command is refused as "not enabled in this build", the answer read from the manifests, as is a
 * vendor storage driver (examples/storage-example) that the build leaves out.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { startWithImage, stopImageDaemons, type ImageDaemon } from '../helpers/image-daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';

const RUN = randomBytes(3).toString('hex');
const hostEnd = `vex${RUN}`;
let withExample: ImageDaemon;
let without: ImageDaemon;

test.before(async () => {
  withExample = await startWithImage({ plugins: 'edge,nic-example', importWith: 'lxc' });
  without = await startWithImage({ importWith: 'lxc' });
});

test.after.always(async () => {
  for (const d of [withExample, without]) if (d) await lxc(d.socket, 'delete', '--force', 'c').catch(() => undefined);
  await stopImageDaemons();
  spawnSync('ip', ['link', 'del', hostEnd], { stdio: 'ignore' });
});

test.serial('with the example in the build, lxc config device add of a nictype=example NIC hot-plugs it; remove unplugs it', async (t) => {
  await lxcOk(t, withExample.socket, 'launch', 'bb', 'c');
  await lxcOk(t, withExample.socket, 'config', 'device', 'add', 'c', 'eth1', 'nic', 'nictype=example', `host_name=${hostEnd}`);
  t.true(existsSync(`/sys/class/net/${hostEnd}`), 'the host end exists');
  t.is(readFileSync(`/sys/class/net/${hostEnd}/ifalias`, 'utf8').trim(), 'default/c/eth1', 'the type labelled its host end (started ran)');
  const hwaddr = (await lxcOk(t, withExample.socket, 'config', 'get', 'c', 'volatile.eth1.hwaddr')).trim();
  t.regex(hwaddr, /^00:16:3e(:[0-9a-f]{2}){3}$/);
  // The name inside is the first free ethN (the device's key is only its name in the config).
  const ifName = (await lxcOk(t, withExample.socket, 'config', 'get', 'c', 'volatile.eth1.name')).trim();
  t.regex(ifName, /^eth\d+$/);
  const inside = await lxcOk(t, withExample.socket, 'exec', 'c', '--', 'ip', 'link', 'show', ifName);
  t.true(inside.includes(hwaddr), inside);
  t.regex(await lxcOk(t, withExample.socket, 'info', 'c'), new RegExp(`${ifName}:[\\s\\S]*Host interface: ${hostEnd}`));
  await lxcOk(t, withExample.socket, 'config', 'device', 'remove', 'c', 'eth1');
  t.false(existsSync(`/sys/class/net/${hostEnd}`), 'the host end went with the device');
  await lxcOk(t, withExample.socket, 'delete', '--force', 'c');
});

test.serial('without the example, the same command is refused as not enabled in this build, and nothing is added', async (t) => {
  await lxcOk(t, without.socket, 'init', 'bb', 'c');
  const res = await lxc(without.socket, 'config', 'device', 'add', 'c', 'eth1', 'nic', 'nictype=example');
  t.not(res.status, 0);
  t.regex(res.stderr, /nictype "example" is not enabled in this build/);
  t.notRegex(await lxcOk(t, without.socket, 'config', 'device', 'show', 'c'), /eth1/);
  // A nictype no manifest declares stays unknown.
  const unknown = await lxc(without.socket, 'config', 'device', 'add', 'c', 'eth1', 'nic', 'nictype=warpnic');
  t.regex(unknown.stderr, /unknown nictype "warpnic"/);
  // So does a vendor storage driver the build leaves out, and a driver nobody declares.
  t.regex((await lxc(without.socket, 'storage', 'create', 'p', 'example')).stderr, /Storage driver "example" is not enabled in this build/);
  t.regex((await lxc(without.socket, 'storage', 'create', 'p', 'warpfs')).stderr, /Storage driver "warpfs" is not supported/);
});
