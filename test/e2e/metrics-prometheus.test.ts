/**
 * A real Prometheus (Debian `prometheus`) scrapes corral's /1.0/metrics over HTTPS with a client
 * certificate of type `metrics`, as an existing LXD scrape job would; the test then asks
 * Prometheus' own HTTP API what it stored.
 */
import test from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon, stopDaemons, killContainers, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { callAndWait, importImage } from '../helpers/api.js';
import { selfSigned, type ClientCert } from '../helpers/pki.js';
import { freePort, tlsRequest, type TlsTarget } from '../helpers/tls-client.js';

let d: Daemon;
let image: BusyboxImage;
let work: string;
let prometheus: ChildProcess | undefined;
let prometheusLog = '';
let promPort: number;
let target: TlsTarget;
let metricsCert: ClientCert;
let stranger: ClientCert;
let restricted: ClientCert;
let tenant: ClientCert;

const ok = (res: { status: number; op?: any; body: string }, what: string) => {
  if (res.status >= 300 || (res.op && res.op.status !== 'Success')) throw new Error(`${what}: ${res.status} ${res.op?.err ?? res.body}`);
};

function promApi(url: string): Promise<any> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: promPort, path: url }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        try { resolve(JSON.parse(text)); } catch { resolve({ status: 'unreadable', body: text, code: res.statusCode }); }
      });
    }).on('error', reject);
  });
}

const query = async (q: string): Promise<any[]> => {
  const res = await promApi(`/api/v1/query?query=${encodeURIComponent(q)}`);
  return res.status === 'success' ? res.data.result : [];
};

test.before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'corral-prom-'));
  image = buildBusyboxImage('gzip');
  d = await startDaemon({ plugins: 'full', args: ['--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
  await importImage(d, image.unified, 'bb');
  ok(await callAndWait(d, 'POST', '/1.0/instances', { name: 'scraped', source: { type: 'image', alias: 'bb' } }), 'create');
  ok(await callAndWait(d, 'PUT', '/1.0/instances/scraped/state', { action: 'start' }), 'start');
  ok(await callAndWait(d, 'POST', '/1.0/instances', { name: 'resting', source: { type: 'image', alias: 'bb' } }), 'create stopped');

  target = { host: '127.0.0.1', port: await freePort() };
  ok(await d.request('PATCH', '/1.0', { config: { 'core.https_address': `${target.host}:${target.port}` } }), 'https address');
  metricsCert = selfSigned(work, 'prometheus');
  stranger = selfSigned(work, 'stranger');
  ok(await d.request('POST', '/1.0/certificates', { type: 'metrics', name: 'prometheus', certificate: metricsCert.base64 }), 'add metrics certificate');
  restricted = selfSigned(work, 'tenant-metrics');
  ok(await d.request('POST', '/1.0/certificates', { type: 'metrics', name: 'tenant', certificate: restricted.base64, restricted: true, projects: ['default'] }), 'add restricted metrics certificate');
  tenant = selfSigned(work, 'tenant-client');
  ok(await d.request('POST', '/1.0/certificates', { type: 'client', name: 'tenant-client', certificate: tenant.base64, restricted: true, projects: ['default'] }), 'add restricted client certificate');

  promPort = await freePort();
  const config = path.join(work, 'prometheus.yml');
  writeFileSync(config, [
    'global:',
    '  scrape_interval: 1s',
    '  scrape_timeout: 1s',
    'scrape_configs:',
    '  - job_name: corral',
    '    metrics_path: /1.0/metrics',
    '    scheme: https',
    '    tls_config:',
    `      cert_file: ${metricsCert.certFile}`,
    `      key_file: ${metricsCert.keyFile}`,
    '      insecure_skip_verify: true',
    '    static_configs:',
    `      - targets: ['${target.host}:${target.port}']`,
    '',
  ].join('\n'));
  prometheus = spawn('prometheus', [
    `--config.file=${config}`, `--storage.tsdb.path=${path.join(work, 'tsdb')}`, `--web.listen-address=127.0.0.1:${promPort}`,
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  prometheus.stdout!.on('data', (c) => (prometheusLog += c));
  prometheus.stderr!.on('data', (c) => (prometheusLog += c));
  await waitFor(async () => (await promApi('/api/v1/status/buildinfo').catch(() => ({}))).status === 'success', 30000, 'prometheus to listen');
});

test.after.always(async () => {
  if (prometheus && prometheus.exitCode === null) {
    const exited = new Promise((resolve) => prometheus!.once('exit', resolve));
    prometheus.kill('SIGTERM');
    await exited;
  }
  if (d) killContainers(d.dir);
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
  if (work) rmSync(work, { recursive: true, force: true });
});

test.serial('a metrics certificate reaches /1.0/metrics over TLS and nothing else; a stranger reaches nothing', async (t) => {
  const scrape = await tlsRequest(target, metricsCert, 'GET', '/1.0/metrics');
  t.is(scrape.status, 200);
  t.regex(String(scrape.headers['content-type']), /^text\/plain/);
  t.regex(scrape.body, /^lxd_procs_total\{name="scraped",project="default",type="container"\} \d+$/m);
  t.is((await tlsRequest(target, metricsCert, 'GET', '/1.0/instances')).status, 403);
  t.is((await tlsRequest(target, stranger, 'GET', '/1.0/metrics')).status, 403);
  t.is((await tlsRequest(target, undefined, 'GET', '/1.0/metrics')).status, 403);
});

test.serial('a restricted client certificate gets its projects\' instances without the server-wide figures', async (t) => {
  const own = await tlsRequest(target, tenant, 'GET', '/1.0/metrics');
  t.is(own.status, 200, own.body);
  t.regex(own.body, /^lxd_procs_total\{name="scraped",project="default",type="container"\} \d+$/m);
  t.notRegex(own.body, /lxd_uptime_seconds|lxd_operations_total/);
  t.is((await tlsRequest(target, tenant, 'GET', '/1.0/metrics?project=elsewhere')).status, 403);
  t.regex((await tlsRequest(target, metricsCert, 'GET', '/1.0/metrics')).body, /^lxd_uptime_seconds \d+$/m);
});

test.serial('a restricted metrics certificate sees its projects only, without the server-wide figures', async (t) => {
  const own = await tlsRequest(target, restricted, 'GET', '/1.0/metrics');
  t.is(own.status, 200, own.body);
  t.regex(own.body, /^lxd_procs_total\{name="scraped",project="default",type="container"\} \d+$/m);
  t.notRegex(own.body, /lxd_uptime_seconds|lxd_operations_total/);
  t.false(own.body.split('\n').some((l) => /project="(?!default")/.test(l)), 'only its own project');
  t.is((await tlsRequest(target, restricted, 'GET', '/1.0/metrics?project=elsewhere')).status, 403);
  // The unrestricted one gets the server-wide figures.
  t.regex((await tlsRequest(target, metricsCert, 'GET', '/1.0/metrics')).body, /^lxd_uptime_seconds \d+$/m);
});

test.serial('Prometheus scrapes the target and stores the container\'s series with the reference\'s labels', async (t) => {
  let procs: any[] = [];
  await waitFor(async () => (procs = await query('lxd_procs_total{name="scraped"}')).length > 0, 30000, `the series in Prometheus (log: ${prometheusLog.slice(-2000)})`);
  t.is(procs.length, 1);
  const { metric, value } = procs[0];
  t.deepEqual(metric, { __name__: 'lxd_procs_total', instance: `${target.host}:${target.port}`, job: 'corral', name: 'scraped', project: 'default', type: 'container' });
  const n = Number(value[1]);
  t.true(Number.isInteger(n) && n >= 1 && n < 50, `processes ${n}`);

  // CPU time per mode, memory and the root filesystem arrive too, under the names dashboards query.
  const modes = (await query('lxd_cpu_seconds_total{name="scraped"}')).map((r) => r.metric.mode);
  t.deepEqual([...new Set(modes)].sort(), ['system', 'user']);
  const memTotal = await query('lxd_memory_MemTotal_bytes{name="scraped"}');
  t.true(Number(memTotal[0]?.value[1]) > 0);
  const rootfs = await query('lxd_filesystem_size_bytes{name="scraped",mountpoint="/"}');
  t.is(rootfs.length, 1);
  // Only running instances are exported.
  t.deepEqual(await query('lxd_procs_total{name="resting"}'), []);
  // A rate over the counters works as in a dashboard panel.
  await new Promise((r) => setTimeout(r, 2500));
  const rate = await query('sum by (name) (rate(lxd_cpu_seconds_total{name="scraped"}[5s]))');
  t.is(rate[0]?.metric.name, 'scraped');
  t.false(Number.isNaN(Number(rate[0]?.value[1])));
});

test.serial('the target is up in /api/v1/targets', async (t) => {
  const res = await promApi('/api/v1/targets');
  t.is(res.status, 'success');
  const active = res.data.activeTargets.filter((x: any) => x.labels.job === 'corral');
  t.is(active.length, 1);
  t.is(active[0].health, 'up', active[0].lastError);
  t.is(active[0].lastError, '');
  t.is(active[0].scrapeUrl, `https://${target.host}:${target.port}/1.0/metrics`);
});
