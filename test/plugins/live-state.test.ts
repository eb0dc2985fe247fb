/**
 * The live-state helper (corral-livestate) against the /proc and sysfs reading it stands in for: a
 * network namespace made here, with a veth pair (IPv4 /24, a routed /32, IPv6) and a second pair left
 * down, one end with a quote in its name, must read the same through both, counters included once traffic
 * has stopped. The helper's failure paths fall back: an unknown pid, a missing binary, a helper
 * killed between two reads. Files are read whole up to 64 KiB; a larger one is left to the caller.
 */
import test from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import bunyan from 'bunyan';
import { createHostTools } from '../../kernel/host-tools/host-tools.js';
import { LiveStateReader } from '../../plugins/instance-lxc/live-state.js';
import { readNetwork } from '../../plugins/instance-lxc/network-state.js';
import { sh, uniqueName } from '../helpers/netns.js';

const tools = createHostTools(bunyan.createLogger({ name: 'netlink-state-test', level: 'fatal' }));
const HELPER = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'plugins', 'instance-lxc', 'corral-livestate');
const ns = uniqueName('n');
const host = uniqueName('h');
let holder: ChildProcess | undefined;

function ip(...args: string[]): void {
  const r = sh('ip', args);
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr.trim()}`);
}

test.before(async () => {
  ip('netns', 'add', ns);
  ip('link', 'add', host, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
  ip('link', 'set', host, 'up');
  const inNs = (...args: string[]) => ip('-n', ns, ...args);
  inNs('link', 'set', 'lo', 'up');
  inNs('link', 'set', 'eth0', 'mtu', '1400', 'up');
  inNs('addr', 'add', '10.250.7.2/24', 'dev', 'eth0');
  inNs('addr', 'add', '10.250.9.9/32', 'dev', 'eth0');
  inNs('addr', 'add', 'fd00:250:7::2/64', 'dev', 'eth0', 'nodad');
  inNs('link', 'add', 'spare-1', 'type', 'veth', 'peer', 'name', 'spare"2');
  // `ip netns exec` mounts the namespace's own sysfs: what /proc/<pid>/root/sys shows of a container.
  holder = spawn('ip', ['netns', 'exec', ns, 'sleep', '600'], { stdio: 'ignore' });
  // The sleep is ip's child once exec'd; ip execs it in place, so the pid is the sleep's.
  await new Promise((r) => setTimeout(r, 300));
});

test.after.always(() => {
  holder?.kill('SIGKILL');
  sh('ip', ['link', 'del', host]);
  sh('ip', ['netns', 'del', ns]);
});

test.serial('the helper reads the files asked, and the interfaces as /proc and sysfs show them, addresses, links and counters alike', async (t) => {
  if (!existsSync(HELPER)) return t.fail(`${HELPER} is not built (npm run build)`);
  const reader = new LiveStateReader(tools, HELPER);
  try {
    const pid = holder!.pid!;
    // Files are read as asked (the driver asks for cgroup counters), one that cannot be read as undefined.
    const comm = `/proc/${pid}/comm`;
    const live = await reader.read(pid, [comm, '/nonexistent/file']);
    t.is(live?.files.get(comm), 'sleep\n');
    t.true(live?.files.has('/nonexistent/file'));
    t.is(live?.files.get('/nonexistent/file'), undefined);
    let viaNetlink = live?.network;
    let viaProc = readNetwork(pid, new Map([['10.250.9.9', 'eth0']]));
    // The two reads are moments apart: a packet arriving between them (IPv6 neighbour discovery on a fresh
    // link) moves a counter. Read both again, a few times, until they were taken with nothing in between.
    for (let attempt = 0; attempt < 5 && JSON.stringify(viaNetlink) !== JSON.stringify(viaProc); attempt++) {
      await new Promise((r) => setTimeout(r, 200));
      viaNetlink = (await reader.read(pid))?.network;
      viaProc = readNetwork(pid, new Map([['10.250.9.9', 'eth0']]));
    }
    t.truthy(viaNetlink);
    t.deepEqual(Object.keys(viaNetlink!), ['eth0', 'lo', 'spare"2', 'spare-1']);
    t.deepEqual(viaNetlink, viaProc);
    const eth0 = viaNetlink!.eth0!;
    t.is(eth0.mtu, 1400);
    t.is(eth0.state, 'up');
    t.is(eth0.type, 'broadcast');
    t.regex(eth0.hwaddr, /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
    t.deepEqual(eth0.addresses.map((a) => `${a.family} ${a.address}/${a.netmask} ${a.scope}`), [
      'inet 10.250.7.2/24 global', 'inet 10.250.9.9/32 global', 'inet6 fd00:250:7::2/64 global', 'inet6 ' + eth0.addresses[3]!.address + '/64 link',
    ]);
    t.is(viaNetlink!['spare-1']!.state, 'down');
  } finally {
    reader.stop();
  }
});

test.serial('files over a page come whole, and one over 64 KiB is left out for the caller to read', async (t) => {
  if (!existsSync(HELPER)) return t.fail(`${HELPER} is not built (npm run build)`);
  const dir = mkdtempSync(path.join(tmpdir(), 'livestate-'));
  const reader = new LiveStateReader(tools, HELPER);
  try {
    // cgroup v1's blkio files pass a page with a few dozen loop devices; before, only the first 4 KiB came back.
    const line = (n: number) => `7:${n} Read ${n * 4096}\n`;
    const medium = Array.from({ length: 600 }, (_, i) => line(i)).join('');
    const large = 'x'.repeat(70 * 1024);
    writeFileSync(path.join(dir, 'medium'), medium);
    writeFileSync(path.join(dir, 'large'), large);
    const live = await reader.read(holder!.pid!, [path.join(dir, 'medium'), path.join(dir, 'large')]);
    t.true(medium.length > 8192);
    t.is(live?.files.get(path.join(dir, 'medium')), medium);
    // Not "could not be read" (undefined in the map) but absent: withContents then reads it itself.
    t.false(live?.files.has(path.join(dir, 'large')));
  } finally {
    reader.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.serial('a pid it cannot read, a missing helper and a killed helper leave the caller to read /proc', async (t) => {
  const reader = new LiveStateReader(tools, HELPER);
  try {
    // No such process: the helper says so, and answers the next one as before.
    t.is(await reader.read(2 ** 22 + 1), undefined);
    t.truthy(await reader.read(holder!.pid!));
    // Killed between reads: the one asked meanwhile falls back, the next starts a new helper.
    (reader as unknown as { helper: { kill(s: string): void } }).helper.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 100));
    t.truthy(await reader.read(holder!.pid!));
  } finally {
    reader.stop();
  }
  const missing = new LiveStateReader(tools, '/nonexistent/corral-livestate');
  t.is(await missing.read(holder!.pid!), undefined);
});
