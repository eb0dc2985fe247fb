/**
 * Proxy devices on real containers of a real daemon (edge set): TCP from the host's loopback into
 * a container (busybox nc inside), unix to TCP, abstract unix names, UDP both ways (busybox
 * syslogd inside sends, a UDP echo server in the container's network namespace answers), TCP and
 * unix to UDP, port ranges, the PROXY protocol header, bind=instance, privileges, hot-plug, stop
 * with the instance, bad input. Every socket is on loopback or a unix path.
 */
import test from 'ava';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { killContainers, startDaemon, startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { callAndWait, importImage } from '../helpers/api.js';
import { claimsNamed } from '../helpers/claims.js';
import { natTable } from '../../plugins/proxy-devices/nat.js';

const RUN = randomBytes(3).toString('hex');
let d: Daemon;
let image: BusyboxImage;
const children: ChildProcess[] = [];
/** Free-ish loopback ports for this run. */
const base = 20000 + Math.floor(Math.random() * 20000);
let nextPort = base;
const port = () => nextPort++;

const call = (method: string, url: string, body?: unknown) => callAndWait(d, method, url, body);

async function edit(name: string, body: unknown): Promise<string> {
  const res = await call('PATCH', `/1.0/instances/${name}`, body);
  if (res.status >= 400) return res.json?.error ?? res.body;
  // PATCH answers synchronously; an operation only comes from other edits.
  if (!res.op) return '';
  return res.op?.status === 'Success' ? '' : String(res.op?.err ?? res.body);
}

/** A long-running command inside the container, its output collected. */
function background(name: string, script: string): { out: () => string; child: ChildProcess } {
  const child = spawn('lxc-attach', ['-n', name, '-P', path.join(d.dir, 'containers'), '--clear-env', '--', '/bin/sh', '-c', script]);
  children.push(child);
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c));
  child.stderr!.on('data', (c: Buffer) => (out += c));
  return { out: () => out, child };
}

function inside(name: string, script: string): { code: number; out: string } {
  const r = spawnSync('lxc-attach', ['-n', name, '-P', path.join(d.dir, 'containers'), '--clear-env', '--', '/bin/sh', '-c', script], { encoding: 'utf8', timeout: 20000 });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

/** As inside(), without blocking this process (for servers the test itself runs). */
function insideAsync(name: string, script: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = spawn('lxc-attach', ['-n', name, '-P', path.join(d.dir, 'containers'), '--clear-env', '--', '/bin/sh', '-c', script]);
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.stderr.on('data', (c: Buffer) => (out += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, out });
    });
  });
}

const initPid = async (name: string): Promise<number> => (await d.request('GET', `/1.0/instances/${name}/state`)).json.metadata.pid;

/** A UDP echo server in the container's network namespace (the host's node, entered with nsenter). */
async function udpEcho(name: string, p: number): Promise<void> {
  const code = `const s=require('dgram').createSocket('udp4');s.on('message',(m,r)=>s.send(Buffer.concat([Buffer.from('echo:'),m]),r.port,r.address));s.bind(${p},'127.0.0.1',()=>console.log('up'))`;
  const child = spawn('nsenter', ['-t', String(await initPid(name)), '-n', process.execPath, '-e', code]);
  children.push(child);
  await within<void>(10000, 'the UDP echo server', (resolve) => child.stdout!.once('data', () => resolve()));
}

/** A promise that gives up after `ms` (a lost packet fails the test instead of hanging it). */
function within<T>(ms: number, what: string, executor: (resolve: (v: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
    executor((v) => {
      clearTimeout(timer);
      resolve(v);
    });
  });
}

/** A whole exchange with a TCP or unix server: send, half-close, collect the answer. */
function exchange(target: net.NetConnectOpts, send: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(target);
    let got = '';
    s.on('data', (c) => (got += c));
    s.on('error', reject);
    s.on('end', () => resolve(got));
    s.on('connect', () => s.end(send));
    setTimeout(() => {
      s.destroy();
      resolve(got);
    }, 5000).unref();
  });
}

function udpExchange(p: number, send: string): Promise<string> {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    const timer = setTimeout(() => {
      s.close();
      resolve('');
    }, 4000);
    s.on('message', (m) => {
      clearTimeout(timer);
      s.close();
      resolve(String(m));
    });
    s.send(send, p, '127.0.0.1');
  });
}

const refused = (p: number) => new Promise<boolean>((resolve) => {
  const s = net.connect(p, '127.0.0.1');
  s.on('connect', () => {
    s.destroy();
    resolve(false);
  });
  s.on('error', () => resolve(true));
});

const forwarders = () => {
  const dir = path.join(d.dir, 'devices', 'proxy');
  return existsSync(dir) ? readdirSync(dir).map((f) => JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as { pid: number }) : [];
};
const alive = (pid: number) => existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));

test.before(async () => {
  image = buildBusyboxImage('gzip');
  d = await startWithPool();
  await importImage(d, image.unified, 'bb');
  const res = await call('POST', '/1.0/instances', { name: 'px', source: { type: 'image', alias: 'bb' } });
  if (res.op?.status !== 'Success') throw new Error(res.op?.err);
  await call('PUT', '/1.0/instances/px/state', { action: 'start' });
});

test.after.always(async () => {
  for (const c of children) c.kill('SIGKILL');
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
});

test.serial('TCP from the host loopback to busybox nc inside the container (proxy)', async (t) => {
  const listen = port();
  const nc = background('px', 'echo hello-from-inside | nc -l -p 8080');
  await waitFor(() => inside('px', 'netstat -ltn').out.includes(':8080'), 10000, 'nc listening');
  t.is(await edit('px', { devices: { web: { type: 'proxy', listen: `tcp:127.0.0.1:${listen}`, connect: 'tcp:127.0.0.1:8080' } } }), '');
  t.is(await exchange({ host: '127.0.0.1', port: listen }, 'hello-from-host\n'), 'hello-from-inside\n');
  await waitFor(() => nc.out().includes('hello-from-host'), 5000, 'nc got the data');
  t.pass();
});

test.serial('unix socket on the host to TCP inside, with uid, gid and mode (proxy_unix, proxy_unix_dac_properties)', async (t) => {
  const sock = `/tmp/corral-proxy-${RUN}.sock`;
  background('px', 'echo via-unix | nc -l -p 8081');
  await waitFor(() => inside('px', 'netstat -ltn').out.includes(':8081'), 10000, 'nc listening');
  t.is(await edit('px', { devices: { sock: { type: 'proxy', listen: `unix:${sock}`, connect: 'tcp:127.0.0.1:8081', uid: '1234', gid: '2345', mode: '0600' } } }), '');
  const st = statSync(sock);
  t.true(st.isSocket());
  t.is(st.uid, 1234);
  t.is(st.gid, 2345);
  t.is(st.mode & 0o777, 0o600);
  t.is(await exchange({ path: sock }, 'x'), 'via-unix\n');
});

test.serial('an abstract unix name on the host to TCP inside; TCP inside to a unix path on the host (bind=instance)', async (t) => {
  background('px', 'echo via-abstract | nc -l -p 8083');
  await waitFor(() => inside('px', 'netstat -ltn').out.includes(':8083'), 10000, 'nc listening');
  const name = `corral-abs-${RUN}`;
  t.is(await edit('px', { devices: { abs: { type: 'proxy', listen: `unix:@${name}`, connect: 'tcp:127.0.0.1:8083' } } }), '');
  t.is(await exchange({ path: `\0${name}` }, 'x'), 'via-abstract\n');

  // A unix server on the host, reached from a TCP port inside the container.
  const hostSock = `/tmp/corral-proxy-host-${RUN}.sock`;
  let received = '';
  const server = net.createServer((c) => {
    c.on('data', (b) => (received += b));
    c.end('from-host-unix\n');
  }).listen(hostSock);
  t.is(await edit('px', { devices: { back: { type: 'proxy', bind: 'instance', listen: 'tcp:127.0.0.1:9090', connect: `unix:${hostSock}` } } }), '');
  const r = await insideAsync('px', 'echo hi-from-inside | nc 127.0.0.1 9090');
  t.is(r.out, 'from-host-unix\n');
  t.is(received, 'hi-from-inside\n');
  server.close();
});

test.serial('UDP both ways, TCP and unix to UDP (proxy_udp)', async (t) => {
  await udpEcho('px', 5353);
  const udp = port();
  const tcp = port();
  const sock = `/tmp/corral-proxy-udp-${RUN}.sock`;
  t.is(await edit('px', { devices: {
    u: { type: 'proxy', listen: `udp:127.0.0.1:${udp}`, connect: 'udp:127.0.0.1:5353' },
    tu: { type: 'proxy', listen: `tcp:127.0.0.1:${tcp}`, connect: 'udp:127.0.0.1:5353' },
    xu: { type: 'proxy', listen: `unix:${sock}`, connect: 'udp:127.0.0.1:5353' },
  } }), '');
  t.is(await udpExchange(udp, 'ping'), 'echo:ping');
  const viaTcp = await within<string>(5000, 'the answer over TCP', (resolve) => {
    const s = net.connect(tcp, '127.0.0.1', () => s.write('over-tcp'));
    s.on('data', (b) => {
      s.destroy();
      resolve(String(b));
    });
  });
  t.is(viaTcp, 'echo:over-tcp');
  const viaUnix = await within<string>(5000, 'the answer over unix', (resolve) => {
    const s = net.connect(sock, () => s.write('over-unix'));
    s.on('data', (b) => {
      s.destroy();
      resolve(String(b));
    });
  });
  t.is(viaUnix, 'echo:over-unix');

  // The other way: busybox syslogd inside sends its log over UDP to a listener the device makes
  // in the container; the host's UDP socket receives it.
  const hostUdp = port();
  const receiver = dgram.createSocket('udp4');
  const got = within<string>(15000, 'the log line over UDP', (resolve) => receiver.on('message', (m) => resolve(String(m))));
  receiver.bind(hostUdp, '127.0.0.1');
  t.is(await edit('px', { devices: { logs: { type: 'proxy', bind: 'instance', listen: 'udp:127.0.0.1:514', connect: `udp:127.0.0.1:${hostUdp}` } } }), '');
  // logger writes to /dev/log, which syslogd makes a moment after it forks: wait for it.
  const sent = await insideAsync('px', 'syslogd -R 127.0.0.1:514 && for i in 1 2 3 4 5 6 7 8 9 10; do [ -S /dev/log ] && break; sleep 0.2; done; logger corral-udp-test');
  t.is(sent.code, 0, sent.out);
  try {
    t.regex(await got, /corral-udp-test/);
  } finally {
    receiver.close();
  }
});

test.serial('port ranges: a range to one port, ranges of equal size (proxy_tcp_udp_multi_port_handling)', async (t) => {
  const a = port();
  const b = port();
  port();
  background('px', 'echo r1 | nc -l -p 8084; echo r2 | nc -l -p 8084');
  await waitFor(() => inside('px', 'netstat -ltn').out.includes(':8084'), 10000, 'nc listening');
  t.is(await edit('px', { devices: { range: { type: 'proxy', listen: `tcp:127.0.0.1:${a}-${b}`, connect: 'tcp:127.0.0.1:8084' } } }), '');
  t.is(await exchange({ host: '127.0.0.1', port: a }, 'x'), 'r1\n');
  await waitFor(() => inside('px', 'netstat -ltn').out.includes(':8084'), 10000, 'nc listening again');
  t.is(await exchange({ host: '127.0.0.1', port: b }, 'x'), 'r2\n');
  // Equal sizes: listen port i goes to connect port i.
  const c = port();
  const e = port();
  background('px', 'echo p1 | nc -l -p 8091');
  background('px', 'echo p2 | nc -l -p 8092');
  await waitFor(() => /:8091[\s\S]*:8092|:8092[\s\S]*:8091/.test(inside('px', 'netstat -ltn').out), 10000, 'nc listening');
  t.is(await edit('px', { devices: { pairs: { type: 'proxy', listen: `tcp:127.0.0.1:${c},${e}`, connect: 'tcp:127.0.0.1:8091-8092' } } }), '');
  t.is(await exchange({ host: '127.0.0.1', port: e }, 'x'), 'p2\n');
  t.is(await exchange({ host: '127.0.0.1', port: c }, 'x'), 'p1\n');
});

test.serial('the PROXY protocol header goes first to the server (proxy_haproxy_protocol)', async (t) => {
  const listen = port();
  const nc = background('px', 'nc -l -p 8085');
  await waitFor(() => inside('px', 'netstat -ltn').out.includes(':8085'), 10000, 'nc listening');
  t.is(await edit('px', { devices: { pp: { type: 'proxy', listen: `tcp:127.0.0.1:${listen}`, connect: 'tcp:127.0.0.1:8085', proxy_protocol: 'true' } } }), '');
  const client = net.connect(listen, '127.0.0.1');
  await new Promise((r) => client.once('connect', r));
  const from = client.localPort;
  client.end('payload\n');
  await waitFor(() => nc.out().includes('payload'), 5000, 'nc got the data');
  t.regex(nc.out(), new RegExp(`^PROXY TCP4 127\\.0\\.0\\.1 127\\.0\\.0\\.1 ${from} ${listen}\\r\\npayload\\n$`));
});

test.serial('security.uid and security.gid: the forwarder drops its privileges (proxy_priv_drop, unix_priv_drop)', async (t) => {
  const listen = port();
  background('px', 'echo dropped | nc -l -p 8086');
  await waitFor(() => inside('px', 'netstat -ltn').out.includes(':8086'), 10000, 'nc listening');
  const before = new Set(forwarders().map((f) => f.pid));
  t.is(await edit('px', { devices: { priv: { type: 'proxy', listen: `tcp:127.0.0.1:${listen}`, connect: 'tcp:127.0.0.1:8086', 'security.uid': '65534', 'security.gid': '65534' } } }), '');
  const mine = forwarders().filter((f) => !before.has(f.pid));
  t.is(mine.length, 1);
  const status = readFileSync(`/proc/${mine[0]!.pid}/status`, 'utf8');
  t.regex(status, /^Uid:\s+65534\s+65534\s+65534\s+65534/m);
  t.regex(status, /^Gid:\s+65534\s+65534\s+65534\s+65534/m);
  t.is(await exchange({ host: '127.0.0.1', port: listen }, 'x'), 'dropped\n');
});

test.serial('hot-unplug stops the forwarder; stopping the instance stops them all; a restart brings them back', async (t) => {
  const listen = port();
  t.is(await edit('px', { devices: { gone: { type: 'proxy', listen: `tcp:127.0.0.1:${listen}`, connect: 'tcp:127.0.0.1:8087' } } }), '');
  t.false(await refused(listen));
  const body = (await d.request('GET', '/1.0/instances/px')).json.metadata;
  delete body.devices.gone;
  const put = await call('PUT', '/1.0/instances/px', body);
  t.is(put.op?.status, 'Success', put.op?.err);
  t.true(await refused(listen));
  const running = forwarders();
  t.true(running.length > 0);
  t.true(running.every((f) => alive(f.pid)));
  await call('PUT', '/1.0/instances/px/state', { action: 'stop', force: true });
  await waitFor(() => running.every((f) => !alive(f.pid)), 5000, 'forwarders gone');
  t.deepEqual(forwarders(), []);
  await call('PUT', '/1.0/instances/px/state', { action: 'start' });
  t.is(forwarders().length, running.length);
});

test.serial('NAT mode: DNAT rules to the static address of a NIC on a managed bridge, gone with the device (proxy_nat)', async (t) => {
  const net = `pn${RUN}`;
  const made = await call('POST', '/1.0/networks', { name: net, type: 'bridge', config: { 'ipv4.address': '10.188.0.1/24', 'ipv4.nat': 'false', 'ipv6.address': 'none' } });
  t.true(made.status < 300, made.body);
  try {
    const res = await call('POST', '/1.0/instances', { name: 'natc', source: { type: 'image', alias: 'bb' }, devices: { eth0: { type: 'nic', network: net, 'ipv4.address': '10.188.0.50' } } });
    t.is(res.op?.status, 'Success', res.op?.err);
    t.is((await call('PUT', '/1.0/instances/natc/state', { action: 'start' })).op?.status, 'Success');
    t.is(inside('natc', 'ip addr add 10.188.0.50/24 dev eth0').code, 0);
    const nc = background('natc', 'nc -l -p 8080 -e sh -c "echo served-over-nat; cat >/dev/null"');
    await waitFor(() => inside('natc', 'netstat -ltn').out.includes(':8080'), 10000, 'nc listening');
    // Not to an address the instance does not hold.
    t.regex(await edit('natc', { devices: { web: { type: 'proxy', nat: 'true', listen: 'tcp:10.188.0.1:8443', connect: 'tcp:10.188.0.77:8080' } } }), /not one/);
    const before = forwarders().length;
    t.is(await edit('natc', { devices: { web: { type: 'proxy', nat: 'true', listen: 'tcp:10.188.0.1:8443', connect: 'tcp:0.0.0.0:8080' } } }), '');
    t.is(forwarders().length, before, 'no forwarder process in NAT mode');
    t.regex(execFileSync('/usr/sbin/nft', ['list', 'table', 'inet', natTable(d.dir)], { encoding: 'utf8' }), /tcp dport 8443 dnat ip to 10\.188\.0\.50:8080/);
    t.is(await exchange({ host: '10.188.0.1', port: 8443 }, 'x'), 'served-over-nat\n');
    void nc;
    const body = (await d.request('GET', '/1.0/instances/natc')).json.metadata;
    delete body.devices.web;
    t.is((await call('PUT', '/1.0/instances/natc', body)).op?.status, 'Success');
    t.notRegex(spawnSync('/usr/sbin/nft', ['list', 'table', 'inet', natTable(d.dir)], { encoding: 'utf8' }).stdout, /8443/);
    await call('PUT', '/1.0/instances/natc/state', { action: 'stop', force: true });
    await call('DELETE', '/1.0/instances/natc');
  } finally {
    await call('DELETE', `/1.0/networks/${net}`);
  }
});

test.serial('a daemon killed with -9: forwarders and hot-plugged NICs keep working, the next daemon unplugs and stops them', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-proxy-restart-'));
  try {
    let d2 = await startWithPool({ dir });
    await importImage(d2, image.unified, 'bb');
    const req = (daemon: Daemon, method: string, url: string, body?: unknown) => callAndWait(daemon, method, url, body);
    const listen = port();
    t.is((await req(d2, 'POST', '/1.0/instances', { name: 'rs', source: { type: 'image', alias: 'bb' }, devices: { web: { type: 'proxy', listen: `tcp:127.0.0.1:${listen}`, connect: 'tcp:127.0.0.1:8088' } } })).op?.status, 'Success');
    t.is((await req(d2, 'PUT', '/1.0/instances/rs/state', { action: 'start' })).op?.status, 'Success');
    const hostName = `rs${RUN}`;
    t.is((await req(d2, 'PATCH', '/1.0/instances/rs', { devices: { eth1: { type: 'nic', nictype: 'p2p', name: 'eth1', host_name: hostName } } })).status, 200);
    const exited = new Promise((resolve) => d2.child.once('exit', resolve));
    d2.child.kill('SIGKILL');
    await exited;
    d2 = await startDaemon({ plugins: 'edge', dir });
    const lxcpath = path.join(dir, 'containers');
    const nc = spawn('lxc-attach', ['-n', 'rs', '-P', lxcpath, '--clear-env', '--', '/bin/sh', '-c', 'echo still-here | nc -l -p 8088']);
    children.push(nc);
    await waitFor(() => spawnSync('lxc-attach', ['-n', 'rs', '-P', lxcpath, '--clear-env', '--', 'netstat', '-ltn'], { encoding: 'utf8' }).stdout.includes(':8088'), 10000, 'nc listening');
    t.is(await exchange({ host: '127.0.0.1', port: listen }, 'x'), 'still-here\n', 'the forwarder outlived the daemon');
    const body = (await d2.request('GET', '/1.0/instances/rs')).json.metadata;
    delete body.devices.eth1;
    t.is((await req(d2, 'PUT', '/1.0/instances/rs', body)).op?.status, 'Success');
    t.false(existsSync(`/sys/class/net/${hostName}`), 'the new daemon unplugged the NIC the old one plugged');
    const record = JSON.parse(readFileSync(path.join(dir, 'devices', 'proxy', 'default_rs.web.json'), 'utf8')) as { pid: number };
    t.true(alive(record.pid));
    t.is((await req(d2, 'PUT', '/1.0/instances/rs/state', { action: 'stop', force: true })).op?.status, 'Success');
    await waitFor(() => !alive(record.pid), 5000, 'the forwarder gone');
    t.true(await refused(listen));
    await d2.stop();
  } finally {
    killContainers(dir);
    rmSync(dir, { recursive: true, force: true });
  }
});

test.serial('bad proxy input: clear 400s, nothing created', async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ listen: 'tcp:127.0.0.1:1000-1002', connect: 'tcp:127.0.0.1:2000-2001' }, /connect ports \(2\).*listen ports \(3\)/],
    [{ listen: 'tcp:127.0.0.1:80' }, /missing "connect"/],
    [{ connect: 'tcp:127.0.0.1:80' }, /missing "listen"/],
    [{ listen: 'sctp:127.0.0.1:80', connect: 'tcp:127.0.0.1:80' }, /tcp:, udp: or unix:/],
    [{ listen: 'tcp:127.0.0.1:99999', connect: 'tcp:127.0.0.1:80' }, /invalid port/],
    [{ listen: 'tcp:::1:80', connect: 'tcp:127.0.0.1:80' }, /brackets/],
    [{ listen: 'unix:relative.sock', connect: 'tcp:127.0.0.1:80' }, /absolute/],
    [{ listen: 'tcp:127.0.0.1:80', connect: 'tcp:127.0.0.1:80', bind: 'elsewhere' }, /"bind"/],
    [{ listen: 'tcp:127.0.0.1:80', connect: 'tcp:127.0.0.1:80', mode: '0600' }, /unix socket path/],
    [{ listen: 'unix:/tmp/x.sock', connect: 'tcp:127.0.0.1:80', mode: 'rw' }, /octal/],
    [{ listen: 'tcp:127.0.0.1:80', connect: 'udp:127.0.0.1:80', proxy_protocol: 'true' }, /proxy_protocol/],
    [{ listen: 'tcp:127.0.0.1:80', connect: 'tcp:127.0.0.1:80', nat: 'true' }, /cannot listen on a loopback/],
    [{ listen: 'tcp:10.0.0.1:80', connect: 'unix:/run/x.sock', nat: 'true' }, /tcp to tcp or udp to udp only/],
    [{ listen: 'tcp:10.0.0.1:80', connect: 'tcp:10.0.0.2:80', nat: 'true', bind: 'instance' }, /bind=host only/],
    [{ listen: 'tcp:127.0.0.1:80', connect: 'tcp:127.0.0.1:80', colour: 'blue' }, /unknown option "colour"/],
  ];
  for (const [device, message] of cases) {
    const res = await call('POST', '/1.0/instances', { name: 'badproxy', source: { type: 'image', alias: 'bb' }, devices: { p: { type: 'proxy', ...device } } });
    t.is(res.status, 400, JSON.stringify(device));
    t.regex(res.json.error, message, JSON.stringify(device));
    t.is((await d.request('GET', '/1.0/instances/badproxy')).status, 404);
  }
  // On the running instance: refused, nothing started.
  const before = forwarders().length;
  t.regex(await edit('px', { devices: { p: { type: 'proxy', listen: 'tcp:127.0.0.1:1000-1002', connect: 'tcp:127.0.0.1:2000-2001' } } }), /connect ports/);
  t.is(forwarders().length, before);
  // A listen address already taken: the forwarder cannot start, the edit is refused whole.
  const busy = net.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => busy.once('listening', r));
  const taken = (busy.address() as net.AddressInfo).port;
  t.regex(await edit('px', { devices: { p: { type: 'proxy', listen: `tcp:127.0.0.1:${taken}`, connect: 'tcp:127.0.0.1:80' } } }), /could not start.*EADDRINUSE/);
  t.is((await d.request('GET', '/1.0/instances/px')).json.metadata.devices.p, undefined);
  t.is(forwarders().length, before);
  busy.close();
});

test('every extension name proxy-devices claims is named by a test that exercises it, and advertised', async (t) => {
  const { claims, unnamed } = claimsNamed('proxy-devices');
  t.true(claims.length > 0);
  t.deepEqual(unnamed, []);
  const advertised: string[] = (await d.request('GET', '/1.0')).json.metadata.api_extensions;
  t.deepEqual(claims.filter((c) => !advertised.includes(c)), []);
});
