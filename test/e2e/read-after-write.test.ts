/**
 * Kept answers are never stale (issue 22, kernel/http/answer-reuse.ts): while clients hammer the
 * listings that keep their answers (and the instance listing, whose status the driver reads), `lxc` makes, edits and removes what they list, and the read made
 * right after each acknowledged write shows it. Every hammering read must succeed too.
 */
import test from 'ava';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { hasLxc, lxcOk } from '../helpers/clients.js';

const serial = hasLxc() ? test.serial : test.serial.skip;
test.after.always(stopDaemons);

const LISTINGS = [
  '/1.0/profiles', '/1.0/profiles?recursion=1', '/1.0/profiles/default', '/1.0/instances', '/1.0/instances?recursion=1', '/1.0/networks?recursion=1', '/1.0/images?recursion=1',
  '/1.0/storage-pools/default/volumes', '/1.0/storage-pools/default/volumes?recursion=1',
];
const HAMMERS = 4;

let d: Daemon;
let fingerprint: string;
test.before(async () => {
  if (!hasLxc()) return;
  d = await startWithPool({ plugins: 'full' });
  fingerprint = await importImage(d, buildBusyboxImage('gzip').unified, 'bb');
});

const read = async (url: string) => {
  const answer = await d.request('GET', url);
  if (answer.status !== 200) throw new Error(`GET ${url}: ${answer.status}`);
  return answer.json.metadata as unknown;
};
const names = async (url: string) => (await read(url) as { name: string }[]).map((item) => item.name);
const find = async <T extends { name: string }>(url: string, name: string) => (await read(url) as T[]).find((item) => item.name === name);

serial('each read right after an acknowledged write shows it, while the listings are hammered', async (t) => {
  let stop = false;
  let reads = 0;
  const failures: string[] = [];
  const hammers = Array.from({ length: HAMMERS }, async (_, h) => {
    for (let i = h; !stop; i++) {
      const url = LISTINGS[i % LISTINGS.length]!;
      const answer = await d.request('GET', url).catch((err: Error) => ({ status: 0, error: err.message }));
      reads++;
      if (answer.status !== 200) failures.push(`${url}: ${answer.status}`);
    }
  });
  try {
    for (let round = 0; round < 3; round++) {
      const profile = `rw-p${round}`;
      const inst = `rw-i${round}`;
      const net = `rwn${round}`;
      const vol = `rw-v${round}`;
      const alias = `rw-a${round}`;

      await lxcOk(t, d.socket, 'profile', 'create', profile);
      t.true((await read('/1.0/profiles') as string[]).includes(`/1.0/profiles/${profile}`), `${profile} listed`);
      await lxcOk(t, d.socket, 'profile', 'set', profile, 'user.round', String(round));
      t.is((await find<{ name: string; config: Record<string, string> }>('/1.0/profiles?recursion=1', profile))?.config['user.round'], String(round));
      t.is((await read(`/1.0/profiles/${profile}`) as { config: Record<string, string> }).config['user.round'], String(round));

      await lxcOk(t, d.socket, 'init', 'bb', inst, '--profile', 'default', '--profile', profile);
      t.true((await read('/1.0/instances') as string[]).includes(`/1.0/instances/${inst}`), `${inst} listed`);
      t.deepEqual((await find<{ name: string; used_by: string[] }>('/1.0/profiles?recursion=1', profile))?.used_by, [`/1.0/instances/${inst}`]);
      t.deepEqual((await read(`/1.0/profiles/${profile}`) as { used_by: string[] }).used_by, [`/1.0/instances/${inst}`]);
      t.true((await names('/1.0/storage-pools/default/volumes?recursion=1')).includes(inst), `${inst}'s volume listed`);
      // The status is read from the host: a listing while lxc-start runs must not leave it looking stopped.
      await lxcOk(t, d.socket, 'start', inst);
      t.is((await find<{ name: string; status: string }>('/1.0/instances?recursion=1', inst))?.status, 'Running');
      await lxcOk(t, d.socket, 'stop', inst, '--force');
      t.is((await find<{ name: string; status: string }>('/1.0/instances?recursion=1', inst))?.status, 'Stopped');
      await lxcOk(t, d.socket, 'snapshot', inst, 's0');
      t.true((await names('/1.0/storage-pools/default/volumes?recursion=1')).includes(`${inst}/s0`), 'its snapshot listed');

      await lxcOk(t, d.socket, 'network', 'create', net, 'ipv4.address=none', 'ipv6.address=none');
      t.is((await find<{ name: string; managed: boolean }>('/1.0/networks?recursion=1', net))?.managed, true, `${net} listed as managed`);
      await lxcOk(t, d.socket, 'network', 'delete', net);
      t.is(await find('/1.0/networks?recursion=1', net), undefined, `${net} gone`);

      await lxcOk(t, d.socket, 'storage', 'volume', 'create', 'default', vol);
      t.true((await read('/1.0/storage-pools/default/volumes') as string[]).includes(`/1.0/storage-pools/default/volumes/custom/${vol}`), `${vol} listed`);
      await lxcOk(t, d.socket, 'storage', 'volume', 'delete', 'default', vol);
      t.false((await read('/1.0/storage-pools/default/volumes') as string[]).includes(`/1.0/storage-pools/default/volumes/custom/${vol}`), `${vol} gone`);

      await lxcOk(t, d.socket, 'image', 'alias', 'create', alias, fingerprint);
      const aliases = async () => ((await read('/1.0/images?recursion=1') as { fingerprint: string; aliases: { name: string }[] }[])
        .find((i) => i.fingerprint === fingerprint)?.aliases ?? []).map((a) => a.name);
      t.true((await aliases()).includes(alias), `${alias} shown`);
      await lxcOk(t, d.socket, 'image', 'alias', 'delete', alias);
      t.false((await aliases()).includes(alias), `${alias} gone`);

      await lxcOk(t, d.socket, 'delete', inst);
      t.false((await read('/1.0/instances') as string[]).includes(`/1.0/instances/${inst}`), `${inst} gone`);
      t.deepEqual((await find<{ name: string; used_by: string[] }>('/1.0/profiles?recursion=1', profile))?.used_by, []);
      t.deepEqual((await read(`/1.0/profiles/${profile}`) as { used_by: string[] }).used_by, []);
      t.false((await names('/1.0/storage-pools/default/volumes?recursion=1')).some((n) => n === inst || n.startsWith(`${inst}/`)), `${inst}'s volumes gone`);
      await lxcOk(t, d.socket, 'profile', 'delete', profile);
      t.is(await find('/1.0/profiles?recursion=1', profile), undefined, `${profile} gone`);
    }
  } finally {
    stop = true;
    await Promise.all(hammers);
  }
  t.deepEqual(failures, []);
  t.true(reads > 100, `the listings were read ${reads} times meanwhile`);
});

/** The pid of a process whose command line is `[lxc monitor] <lxcpath> <name>`, if one runs. */
function monitorOf(name: string): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0+$/, '');
    } catch {
      continue;
    }
    if (cmdline.startsWith('[lxc monitor] ') && cmdline.endsWith(` ${name}`)) return Number(entry);
  }
  return undefined;
}

/** The file that freezes `pid`'s cgroup, and what to write to it. */
function freezerOf(pid: number): { file: string; frozen: string; thawed: string } {
  const mounts = readFileSync('/proc/self/mounts', 'utf8').split('\n').map((l) => l.split(' '));
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n').map((l) => l.split(':'));
  const v1 = lines.find(([, controllers]) => controllers?.split(',').includes('freezer'));
  const v1Mount = mounts.find(([, , type, options]) => type === 'cgroup' && options?.split(',').includes('freezer'))?.[1];
  if (v1 && v1Mount) return { file: `${v1Mount}${v1[2]}/freezer.state`, frozen: 'FROZEN', thawed: 'THAWED' };
  const v2 = lines.find(([id]) => id === '0');
  const v2Mount = mounts.find(([, , type]) => type === 'cgroup2')?.[1];
  if (!v2 || !v2Mount) throw new Error(`no freezer found for ${pid}`);
  return { file: `${v2Mount}${v2[2]}/cgroup.freeze`, frozen: '1', thawed: '0' };
}

serial('a container frozen or stopped behind the daemon\'s back shows so at the next read of a kept listing', async (t) => {
  const inst = 'rw-own';
  await lxcOk(t, d.socket, 'init', 'bb', inst);
  await lxcOk(t, d.socket, 'start', inst);
  const status = async (url = '/1.0/instances?recursion=1') => (await find<{ name: string; status: string }>(url, inst))?.status;
  const filtered = `/1.0/instances?recursion=1&filter=${encodeURIComponent(`name eq ${inst}`)}`;
  try {
    // Read enough times for the answers to be kept.
    for (let i = 0; i < 3; i++) t.is(await status(), 'Running');
    t.is(await status(filtered), 'Running');
    const pid = (await read(`/1.0/instances/${inst}/state`) as { pid: number }).pid;
    t.true(pid > 0);
    // The freezer of its init's own cgroup, as the driver reads it: v1's where that hierarchy is mounted, else v2's.
    const freezer = freezerOf(pid);
    writeFileSync(freezer.file, freezer.frozen);
    // v1 reads FREEZING until every task stopped (a while on a loaded machine): wait for the kernel's word.
    const frozenBy = Date.now() + 10_000;
    while (readFileSync(freezer.file, 'utf8').trim() !== freezer.frozen && Date.now() < frozenBy) await new Promise((resolve) => setTimeout(resolve, 20));
    t.is(readFileSync(freezer.file, 'utf8').trim(), freezer.frozen, 'the kernel froze it');
    t.is(await status(), 'Frozen');
    t.is(await status(filtered), 'Frozen');
    writeFileSync(freezer.file, freezer.thawed);
    t.is(await status(), 'Running');
    process.kill(pid, 'SIGKILL');
    // Once the container's monitor is gone, the very next read must say so.
    const deadline = Date.now() + 15_000;
    while (monitorOf(inst) !== undefined && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    t.is(monitorOf(inst), undefined, 'the monitor went once init was killed');
    t.is(await status(), 'Stopped');
    t.is(await status(filtered), 'Stopped');
  } finally {
    await lxcOk(t, d.socket, 'delete', inst, '--force');
  }
});

serial('a stopped container\'s kept recursion=2 view gives way to a snapshot and to a start at the next read', async (t) => {
  const inst = 'rw-full';
  type Full = { name: string; status: string; state: { pid: number }; snapshots: { name: string }[] | null };
  const full = async () => find<Full>('/1.0/instances?recursion=2', inst);
  await lxcOk(t, d.socket, 'init', 'bb', inst);
  try {
    // Read enough times for the stopped view to be kept.
    for (let i = 0; i < 3; i++) t.is((await full())?.status, 'Stopped');
    await lxcOk(t, d.socket, 'snapshot', inst, 'snap0');
    t.deepEqual((await full())?.snapshots?.map((s) => s.name), ['snap0']);
    await lxcOk(t, d.socket, 'delete', `${inst}/snap0`);
    for (let i = 0; i < 3; i++) t.deepEqual((await full())?.snapshots ?? [], []);
    await lxcOk(t, d.socket, 'start', inst);
    const started = await full();
    t.is(started?.status, 'Running');
    t.true((started?.state.pid ?? 0) > 0);
    await lxcOk(t, d.socket, 'stop', inst, '--force');
    for (let i = 0; i < 3; i++) t.like(await full(), { status: 'Stopped', state: { pid: 0 } });
  } finally {
    await lxcOk(t, d.socket, 'delete', inst, '--force');
  }
});
