/**
 * What a running VM reports, and VMs across daemon restarts and host shutdown, through the real
 * `lxc` client, pylxd and promtool on real QEMU (TCG): the state (`lxc info`, GET .../state) from
 * the guest agent's view with the host's tap names, `GET /1.0/metrics` for VMs, a paused guest's
 * state answering at once, `corrald shutdown` stopping VMs by boot.stop.priority within
 * boot.host_shutdown_timeout (ACPI first, then forced), boot.autostart bringing one back, and the
 * api_extensions the qemu driver claims. At most two VMs at once, 1 vCPU and 256MiB each.
 */
import test from 'ava';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { collect, projectRoot, startDaemon, startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxc, python } from '../helpers/clients.js';
import { corraldCli } from '../helpers/corrald-cli.js';
import { claimsNamed } from '../helpers/claims.js';
import { importTestVmImage, qemuOf, vmProblem } from '../helpers/vm-image.js';
import { uniqueName } from '../helpers/netns.js';
import { selfSigned } from '../helpers/pki.js';
import { freePort } from '../helpers/tls-client.js';
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { writeFileSync } from 'node:fs';

const skip = vmProblem();
const vmTest = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`Skipping what virtual machines report: ${skip}`);

let d: Daemon;
let dir: string;
let prometheus: ChildProcess | undefined;
const bridge = uniqueName();
const SMALL = ['-c', 'limits.memory=256MiB', '-c', 'limits.cpu=1'];
const ENV = { CORRAL_QEMU_ACCEL: 'tcg' };


const status = async (name: string) => (await d.request('GET', `/1.0/instances/${name}`)).json.metadata.status;
const vmState = async (name: string) => (await d.request('GET', `/1.0/instances/${name}/state`)).json.metadata;
const agentUp = (name: string, ms = 120_000) => waitFor(async () => (await lxc(d.socket, 'exec', name, '--', 'true')).status === 0, ms, `the agent of ${name}`);

test.before(async () => {
  if (skip) return;
  dir = mkdtempSync(path.join(tmpdir(), 'corral-vmo-'));
  d = await startWithPool({ dir, plugins: 'full', env: ENV });
  await importTestVmImage(d.socket, 'vm');
  const created = await lxc(d.socket, 'network', 'create', bridge, 'ipv4.address=auto', 'ipv4.nat=false', 'ipv6.address=none');
  if (created.status !== 0) throw new Error(`network create failed: ${created.stderr}`);
});

test.after.always(async () => {
  if (prometheus && prometheus.exitCode === null) {
    const exited = new Promise((resolve) => prometheus!.once('exit', resolve));
    prometheus.kill('SIGTERM');
    await exited;
  }
  if (skip) return;
  for (const name of ['o1', 'o2', 'py1']) await lxc(d.socket, 'delete', '--force', name);
  await lxc(d.socket, 'network', 'delete', bridge);
  await stopDaemons();
  for (const pid of qemuOf(dir)) process.kill(pid, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

vmTest('the state of a running VM is the guest\'s view from its agent (processes, CPU, memory and peak, interfaces and addresses) with the host\'s tap names, QEMU\'s pid and the root disk\'s allocated bytes', async (t) => {
  const launch = await lxc(d.socket, 'launch', 'vm', 'o1', '--vm', '-n', bridge, ...SMALL);
  t.is(launch.status, 0, launch.stderr);
  await agentUp('o1');
  const config = (await d.request('GET', '/1.0/instances/o1')).json.metadata.config;
  const tap = config['volatile.eth0.host_name'];
  const hwaddr = config['volatile.eth0.hwaddr'];
  await waitFor(async () => ((await vmState('o1')).network?.eth0?.addresses ?? []).some((a: { family: string }) => a.family === 'inet'), 90_000, 'the guest\'s DHCP address in its state');

  const s = await vmState('o1');
  // The fields the reference's InstanceState has, no more.
  t.deepEqual(Object.keys(s).sort(), ['cpu', 'disk', 'memory', 'network', 'pid', 'processes', 'status', 'status_code']);
  t.is(s.status, 'Running');
  t.is(s.status_code, 103);
  t.deepEqual(qemuOf(dir), [s.pid], 'pid is QEMU\'s');
  t.true(s.processes > 1, `processes from the agent: ${s.processes}`);
  t.true(s.cpu.usage > 0, `cpu ${s.cpu.usage}`);
  // The guest's own usage (not QEMU's resident memory, which also holds QEMU and the guest's page cache).
  const rss = Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${s.pid}/status`, 'utf8'))![1]) * 1024;
  t.true(s.memory.usage > 0 && s.memory.usage < 256 * 1024 * 1024, `memory ${s.memory.usage}`);
  t.not(s.memory.usage, rss);
  t.true(s.memory.usage_peak >= s.memory.usage, `peak ${s.memory.usage_peak} >= usage ${s.memory.usage}`);
  t.deepEqual(Object.keys(s.memory).sort(), ['swap_usage', 'swap_usage_peak', 'usage', 'usage_peak']);
  // The root disk: the bytes root.img takes on the pool, not its 10GiB size.
  const img = path.join(dir, 'storage-pools', 'default', 'virtual-machines', 'o1', 'root.img');
  const allocated = statSync(img).blocks * 512;
  t.true(s.disk.root.usage > 0 && s.disk.root.usage < 1024 ** 3, `disk ${s.disk.root.usage}`);
  t.true(Math.abs(s.disk.root.usage - allocated) < 64 * 1024 * 1024, `disk ${s.disk.root.usage} vs allocated ${allocated}`);
  // The guest's interfaces: its loopback, and eth0 with the host's tap as host_name.
  t.deepEqual(Object.keys(s.network).sort(), ['eth0', 'lo']);
  t.is(s.network.eth0.host_name, tap);
  t.is(s.network.eth0.hwaddr, hwaddr);
  t.is(s.network.eth0.state, 'up');
  t.true(s.network.eth0.counters.packets_sent > 0, 'the guest\'s DHCP packets');
  t.true(s.network.lo.addresses.some((a: { address: string }) => a.address === '127.0.0.1'));
  const lease = (await lxc(d.socket, 'network', 'list-leases', bridge, '--format', 'csv')).stdout;
  const inet = s.network.eth0.addresses.find((a: { family: string }) => a.family === 'inet');
  t.regex(lease, new RegExp(`o1,${hwaddr},${inet.address.replace(/\./g, '\\.')},DYNAMIC`), 'the address is the lease');
  t.deepEqual(Object.keys(inet).sort(), ['address', 'family', 'netmask', 'scope']);

  const info = await lxc(d.socket, 'info', 'o1');
  t.is(info.status, 0, info.stderr);
  t.regex(info.stdout, new RegExp(`PID: ${s.pid}`));
  t.regex(info.stdout, /Processes: [1-9]\d*/);
  t.regex(info.stdout, /Memory usage:\s+Memory \(current\): [\d.]+[KM]iB/);
  t.regex(info.stdout, new RegExp(`Host interface: ${tap}`));
  t.regex(info.stdout, new RegExp(`inet:\\s+${inet.address.replace(/\./g, '\\.')}/`));

  // Cheap: answered from file reads and one agent round trip.
  const started = Date.now();
  for (let i = 0; i < 20; i++) await d.request('GET', '/1.0/instances/o1/state');
  const each = (Date.now() - started) / 20;
  t.log(`GET .../state of a running VM: ${each.toFixed(1)} ms each`);
  t.true(each < 250, `${each} ms`);
});

vmTest('a paused VM\'s state answers at once without asking the guest: Frozen, processes -1, QEMU\'s CPU time, the peak kept', async (t) => {
  const before = await vmState('o1');
  t.is((await lxc(d.socket, 'pause', 'o1')).status, 0);
  const started = Date.now();
  const s = await vmState('o1');
  const took = Date.now() - started;
  t.log(`GET .../state of a paused VM: ${took} ms`);
  t.true(took < 1000, `took ${took} ms (the agent's own bound is 5 s)`);
  t.is(s.status, 'Frozen');
  t.is(s.status_code, 110);
  t.is(s.processes, -1);
  t.true(s.cpu.usage > 0);
  t.is(s.memory.usage, 0, 'no guest figure while it cannot answer');
  t.true(s.memory.usage_peak >= before.memory.usage);
  t.is(s.network.eth0.host_name, before.network.eth0.host_name, 'the tap still shows');
  // The metrics scrape does not wait for it either.
  const scraping = Date.now();
  t.is((await d.request('GET', '/1.0/metrics')).status, 200);
  t.true(Date.now() - scraping < 2000);
  t.is((await lxc(d.socket, 'start', 'o1')).status, 0);
  t.is(await status('o1'), 'Running');
});

vmTest('GET /1.0/metrics has the lxd_* families of a running VM (type="virtual-machine"): CPU seconds, memory, per-drive disk I/O from QMP, network, processes from the agent; promtool reads it; security.agent.metrics=false gives the host\'s figures only (qemu_metrics)', async (t) => {
  await agentUp('o1');
  // Some guest I/O to count.
  t.is((await lxc(d.socket, 'exec', 'o1', '--', 'sh', '-c', 'dd if=/dev/zero of=/root/io bs=64k count=16 && sync && cat /root/io > /dev/null')).status, 0);
  const text = String((await d.request('GET', '/1.0/metrics')).body);
  const value = (family: string, labels = '') => {
    const m = new RegExp(`^${family}\\{([^}]*)\\} (\\S+)$`, 'm').exec(text.split('\n').filter((l) => l.startsWith(family + '{') && l.includes('name="o1"') && l.includes(labels)).join('\n'));
    return m ? { labels: m[1]!, value: Number(m[2]) } : undefined;
  };
  for (const [family, labels] of [
    ['lxd_cpu_seconds_total', 'mode="user"'], ['lxd_memory_MemTotal_bytes', ''], ['lxd_memory_MemAvailable_bytes', ''], ['lxd_memory_RSS_bytes', ''],
    ['lxd_disk_read_bytes_total', 'device="vda"'], ['lxd_disk_written_bytes_total', 'device="vda"'], ['lxd_disk_reads_completed_total', 'device="vda"'],
    ['lxd_network_receive_bytes_total', 'device="eth0"'], ['lxd_network_transmit_packets_total', 'device="eth0"'], ['lxd_procs_total', ''],
  ] as const) {
    const v = value(family, labels);
    t.truthy(v, `${family}{${labels}} for o1`);
    if (!v) continue;
    t.regex(v.labels, /project="default"/);
    t.regex(v.labels, /type="virtual-machine"/);
  }
  t.is(value('lxd_memory_MemTotal_bytes')!.value, 256 * 1024 * 1024);
  const available = value('lxd_memory_MemAvailable_bytes')!.value;
  t.true(available > 0 && available < 256 * 1024 * 1024, `MemAvailable ${available}`);
  t.true(value('lxd_procs_total')!.value > 1, 'processes from the agent');
  t.true(value('lxd_disk_written_bytes_total', 'device="vda"')!.value >= 1024 * 1024, 'the guest\'s 1 MiB write, counted by QEMU per drive');
  t.true(value('lxd_network_transmit_packets_total', 'device="eth0"')!.value > 0);

  const res = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (res.error) return t.log(`promtool not run: ${res.error.message}`);
  t.not(res.status, 1, `parse error: ${res.stdout}${res.stderr}`);
  const notes = (res.stdout + res.stderr).split('\n').filter(Boolean);
  const allowed = /^lxd_memory_Mem(Available|Free|Total)_bytes metric names should be written in 'snake_case'|^lxd_procs_total non-counter metrics should not have "_total" suffix|^lxd_operations_total non-counter metrics should not have "_total" suffix/;
  for (const note of notes) t.regex(note, allowed);

  // security.agent.metrics=false (live): the agent is not asked, for the state nor the metrics.
  t.is((await lxc(d.socket, 'config', 'set', 'o1', 'security.agent.metrics=false')).status, 0);
  const hostOnly = await vmState('o1');
  t.is(hostOnly.processes, -1);
  t.deepEqual(Object.keys(hostOnly.network), ['eth0'], 'only the NIC the host knows, by its tap');
  const scraped = String((await d.request('GET', '/1.0/metrics')).body);
  t.false(/^lxd_memory_MemAvailable_bytes\{[^}]*name="o1"/m.test(scraped), 'no guest memory figure');
  t.regex(scraped, /^lxd_procs_total\{[^}]*name="o1"[^}]*\} 0$/m);
  t.is((await lxc(d.socket, 'config', 'unset', 'o1', 'security.agent.metrics')).status, 0);
  t.true((await vmState('o1')).processes > 1, 'the agent is asked again');
});

/** Asks the private Prometheus' HTTP API. */
function promQuery(port: number, q: string): Promise<any[]> {
  return new Promise((resolve) => {
    http.get({ host: '127.0.0.1', port, path: `/api/v1/query?query=${encodeURIComponent(q)}` }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        try {
          const body = JSON.parse(text);
          resolve(body.status === 'success' ? body.data.result : []);
        } catch {
          resolve([]);
        }
      });
    }).on('error', () => resolve([]));
  });
}

vmTest('a private Prometheus (Debian prometheus) scrapes /1.0/metrics over TLS with a metrics certificate and stores the VM\'s series with type="virtual-machine"', async (t) => {
  const work = path.join(dir, 'prom');
  const port = await freePort();
  const promPort = await freePort();
  t.is((await d.request('PATCH', '/1.0', { config: { 'core.https_address': `127.0.0.1:${port}` } })).status, 200);
  const cert = selfSigned(dir, 'prometheus');
  t.is((await d.request('POST', '/1.0/certificates', { type: 'metrics', name: 'prometheus', certificate: cert.base64 })).status, 200);
  const config = path.join(dir, 'prometheus.yml');
  writeFileSync(config, [
    'global:', '  scrape_interval: 1s', '  scrape_timeout: 1s', 'scrape_configs:', '  - job_name: corral',
    '    metrics_path: /1.0/metrics', '    scheme: https', '    tls_config:', `      cert_file: ${cert.certFile}`, `      key_file: ${cert.keyFile}`,
    '      insecure_skip_verify: true', '    static_configs:', `      - targets: ['127.0.0.1:${port}']`, '',
  ].join('\n'));
  let log = '';
  prometheus = spawn('prometheus', [`--config.file=${config}`, `--storage.tsdb.path=${work}`, `--web.listen-address=127.0.0.1:${promPort}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  prometheus.stdout!.on('data', (c) => (log += c));
  prometheus.stderr!.on('data', (c) => (log += c));
  let procs: any[] = [];
  await waitFor(async () => (procs = await promQuery(promPort, 'lxd_procs_total{name="o1"}')).length > 0, 60_000, `the VM's series in Prometheus (log: ${log.slice(-1500)})`);
  t.deepEqual(procs[0].metric, { __name__: 'lxd_procs_total', instance: `127.0.0.1:${port}`, job: 'corral', name: 'o1', project: 'default', type: 'virtual-machine' });
  t.true(Number(procs[0].value[1]) > 1, 'processes from the agent');
  t.is((await promQuery(promPort, 'lxd_disk_written_bytes_total{name="o1",device="vda"}')).length, 1);
  t.is((await promQuery(promPort, 'lxd_memory_MemAvailable_bytes{name="o1"}')).length, 1);
  await new Promise((r) => setTimeout(r, 2500));
  const rate = await promQuery(promPort, 'sum by (name) (rate(lxd_cpu_seconds_total{name="o1"}[5s]))');
  t.is(rate[0]?.metric.name, 'o1');
  t.false(Number.isNaN(Number(rate[0]?.value[1])));
  const up = await promQuery(promPort, 'up{job="corral"}');
  t.is(up[0]?.value[1], '1', 'every scrape within its 1 s timeout');
  const exited = new Promise((resolve) => prometheus!.once('exit', resolve));
  prometheus.kill('SIGTERM');
  await exited;
  prometheus = undefined;
});

vmTest('a plain daemon restart leaves running VMs alone (boot.autostart does not start them twice); the adopted VM\'s state comes from its agent again', async (t) => {
  t.is((await lxc(d.socket, 'config', 'set', 'o1', 'boot.autostart=true', 'boot.stop.priority=10')).status, 0);
  const [pid] = qemuOf(dir);
  await d.stop();
  t.deepEqual(qemuOf(dir), [pid], 'QEMU outlives the daemon');
  d = await startDaemon({ dir, plugins: 'full', env: ENV });
  t.is(await status('o1'), 'Running');
  t.deepEqual(qemuOf(dir), [pid], 'the same QEMU, adopted');
  await waitFor(async () => (await vmState('o1')).processes > 1, 30_000, 'the agent\'s figures after the restart');
  t.is((await vmState('o1')).pid, pid);
});

vmTest('corrald shutdown stops VMs by boot.stop.priority within boot.host_shutdown_timeout (ACPI first, then forced: container_stop_priority, container_host_shutdown_timeout); boot.autostart brings one back, boot.autostart=false keeps the other stopped', async (t) => {
  // o2 never sees the power button (no ACPI): it is killed once its 2 s are up.
  const o2 = await lxc(d.socket, 'launch', 'vm', 'o2', '--vm', ...SMALL, '-c', 'raw.qemu=-machine acpi=off',
    '-c', 'boot.stop.priority=1', '-c', 'boot.host_shutdown_timeout=2', '-c', 'boot.autostart=false');
  t.is(o2.status, 0, o2.stderr);
  t.is(qemuOf(dir).length, 2);
  // o1's power button watcher starts with its init scripts: its agent being up means they ran.
  await agentUp('o1');
  const events = collect(await d.websocket('/1.0/events?type=lifecycle'));
  const exit = new Promise<number | null>((resolve) => d.child.once('exit', (code) => resolve(code)));
  const started = Date.now();
  const asked = await corraldCli(['shutdown', '--dir', dir, '--timeout', '90']);
  const took = Date.now() - started;
  t.is(asked.status, 0, asked.stderr);
  t.is(await exit, 0, 'the daemon exits 0');
  t.log(`corrald shutdown with two VMs (one powering off on ACPI, one ignoring it, 2 s): ${took} ms`);
  const stops = events.filter((e) => e.metadata.action === 'instance-shutdown').map((e) => ({ name: e.metadata.source.split('/').pop(), at: Date.parse(e.timestamp) }));
  t.deepEqual(stops.map((s) => s.name), ['o1', 'o2'], 'higher boot.stop.priority first');
  t.deepEqual(qemuOf(dir), [], 'no QEMU left');
  // o1 powered itself off on ACPI (well before the default 30 s); o2 was forced after its 2 s (+1 s).
  t.true(stops[0]!.at - started < 20_000, `o1 stopped ${stops[0]!.at - started} ms after the request`);
  const o2took = stops[1]!.at - stops[0]!.at;
  t.true(o2took >= 1500 && o2took < 3000 + 1000, `o2 forced after ${o2took} ms`);
  const log = readFileSync(path.join(dir, 'logs', 'o1', 'console.log'), 'utf8');
  t.regex(log, /power ?(button|down|off)|reboot: Power down/i, 'o1 saw the power button');

  d = await startDaemon({ dir, plugins: 'full', env: ENV });
  await waitFor(async () => (await status('o1')) === 'Running', 60_000, 'o1 to autostart');
  t.is(await status('o2'), 'Stopped', 'boot.autostart=false wins over the state at shutdown');
  // A start shows Running from QEMU's first fork on: once the agent answers, -daemonize's parent is gone.
  await agentUp('o1');
  t.is(qemuOf(dir).length, 1, 'o1 alone runs');
  t.is((await lxc(d.socket, 'exec', 'o1', '--', 'echo', 'back')).stdout, 'back\n');
  t.is((await lxc(d.socket, 'stop', '--force', 'o1')).status, 0);
  t.deepEqual(qemuOf(dir), []);
});

vmTest('boot.priority on a VM\'s disk and NIC orders its boot devices (vm_boot_priority); raw.qemu.conf overrides a generated section and a malformed one is refused (qemu_raw_conf)', async (t) => {
  if (await status('o1') !== 'Stopped') t.is((await lxc(d.socket, 'stop', '--force', 'o1')).status, 0);
  t.is((await lxc(d.socket, 'config', 'device', 'set', 'o1', 'eth0', 'boot.priority=10')).status, 0);
  const root = await lxc(d.socket, 'config', 'device', 'override', 'o1', 'root', 'boot.priority=5');
  t.is(root.status, 0, root.stderr);
  const bad = await lxc(d.socket, 'config', 'set', 'o1', 'raw.qemu.conf', 'size = "200M"');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /raw\.qemu\.conf/);
  t.is((await lxc(d.socket, 'config', 'set', 'o1', 'raw.qemu.conf', '[memory]\nsize = "200M"')).status, 0);
  const start = await lxc(d.socket, 'start', 'o1');
  t.is(start.status, 0, start.stderr);
  const conf = readFileSync(path.join(dir, 'qemu', 'o1', 'qemu.conf'), 'utf8');
  t.regex(conf, /\[device "dev-nic-eth0"\][^[]*bootindex = "1"/, 'the NIC (10) boots first');
  t.regex(conf, /\[device "dev-root"\][^[]*bootindex = "2"/, 'then the root disk (5)');
  t.regex(conf, /\[memory\][^[]*size = "200M"/);
  t.is((await lxc(d.socket, 'stop', '--force', 'o1')).status, 0);
  t.is((await lxc(d.socket, 'config', 'unset', 'o1', 'raw.qemu.conf')).status, 0);
  t.deepEqual(qemuOf(dir), []);
});

vmTest('pylxd creates a VM on /1.0/virtual-machines, starts it, runs a command through its agent, reads its state, stops and deletes it (virtual-machines, virtual_machines, instances)', async (t) => {
  const run = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_vm.py'), [d.socket, 'py1', 'vm']);
  t.is(run.status, 0, run.stderr);
  const seen = JSON.parse(run.stdout);
  t.deepEqual(seen.extensions, { 'virtual-machines': true, virtual_machines: true, instances: true });
  t.is(seen.create, 'Success');
  t.true(seen.listed_vms);
  t.false(seen.listed_containers);
  t.is(seen.type, 'virtual-machine');
  t.is(seen.start, 'Success');
  t.is(seen.exit_code, 5);
  t.is(seen.stdout, 'vm-42\n');
  t.is(seen.state.status, 'Running');
  t.true(seen.state.processes > 1);
  t.true(seen.state.memory_usage > 0);
  t.true(seen.state.pid > 0);
  t.deepEqual(seen.state.interfaces, ['lo']);
  t.is(seen.stop, 'Success');
  t.is(seen.delete, 'Success');
  t.is(seen.after_delete, 'not found');
  t.deepEqual(qemuOf(dir), []);
});

test('the instance-qemu plugin claims only api_extensions a test title names, and the daemon advertises them', async (t) => {
  const { claims, unnamed } = claimsNamed('instance-qemu');
  t.deepEqual(unnamed, []);
  if (skip) return;
  const advertised: string[] = (await d.request('GET', '/1.0')).json.metadata.api_extensions;
  t.deepEqual(claims.filter((c) => !advertised.includes(c)), []);
});
