/**
 * GET /1.0/metrics on a real daemon with real containers: the reference's families and label sets,
 * values checked against the containers' own cgroup files, only running instances, project
 * filtering, and the text read by the test's own parser and by promtool (Debian prometheus).
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { startDaemon, stopDaemons, killContainers, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { callAndWait, importImage } from '../helpers/api.js';
import { cgroupFileOf } from '../helpers/cgroup.js';
import { parseExposition, type ParsedFamily } from '../helpers/exposition.js';

let d: Daemon;
let image: BusyboxImage;
const MEMORY_LIMIT = 96 * 1024 * 1024;

const ok = (res: { status: number; op?: any; body: string }, what: string) => {
  if (res.status >= 300 || (res.op && res.op.status !== 'Success')) throw new Error(`${what}: ${res.status} ${res.op?.err ?? res.body}`);
};

async function scrape(query = ''): Promise<{ families: Map<string, ParsedFamily>; text: string; contentType: string }> {
  const res = await d.request('GET', `/1.0/metrics${query}`);
  if (res.status !== 200) throw new Error(`metrics: ${res.status} ${res.body}`);
  return { families: parseExposition(res.body), text: res.body, contentType: String(res.headers['content-type']) };
}

const seriesOf = (families: Map<string, ParsedFamily>, family: string, name: string) =>
  (families.get(family)?.samples ?? []).filter((s) => s.labels.name === name);

/** Instances in a second project: through the projects plugin when it is built in, else with the project's own image and no profile. */
async function createInOtherProject(name: string): Promise<void> {
  const project = await d.request('POST', '/1.0/projects', { name: 'p2', config: { 'features.images': 'false', 'features.profiles': 'false' } });
  if (project.status === 200) {
    ok(await callAndWait(d, 'POST', '/1.0/instances?project=p2', { name, source: { type: 'image', alias: 'bb' } }), 'create in p2');
    return;
  }
  const img = await callAndWait(d, 'POST', '/1.0/images?project=p2', readFileSync(image.unified), { 'content-type': 'application/octet-stream' });
  ok(img, 'image in p2');
  ok(await callAndWait(d, 'POST', '/1.0/instances?project=p2', {
    name, profiles: [], source: { type: 'image', fingerprint: img.op.metadata.fingerprint },
    devices: { root: { type: 'disk', path: '/', pool: 'default' } },
  }), 'create in p2');
}

test.before(async () => {
  image = buildBusyboxImage('gzip');
  // The metrics plugin is in the full set only.
  d = await startDaemon({ plugins: 'full', args: ['--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
  await importImage(d, image.unified, 'bb');
  ok(await callAndWait(d, 'POST', '/1.0/instances', { name: 'run1', source: { type: 'image', alias: 'bb' }, config: { 'limits.memory': String(MEMORY_LIMIT) } }), 'create run1');
  ok(await callAndWait(d, 'POST', '/1.0/instances', { name: 'idle1', source: { type: 'image', alias: 'bb' } }), 'create idle1');
  await createInOtherProject('run2');
  ok(await callAndWait(d, 'PUT', '/1.0/instances/run1/state', { action: 'start' }), 'start run1');
  ok(await callAndWait(d, 'PUT', '/1.0/instances/run2/state?project=p2', { action: 'start' }), 'start run2');
});

test.after.always(async () => {
  if (d) killContainers(d.dir);
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
});

test.serial('families, HELP/TYPE and label sets as the reference sends them (metrics)', async (t) => {
  const { families, contentType } = await scrape();
  t.regex(contentType, /^text\/plain\b/);
  const expectLabels = (family: string, labels: string[]) => {
    const samples = families.get(family)?.samples ?? [];
    t.true(samples.length > 0, `${family} has samples`);
    for (const s of samples) t.deepEqual(Object.keys(s.labels).sort(), labels, family);
  };
  expectLabels('lxd_cpu_seconds_total', ['cpu', 'mode', 'name', 'project', 'type']);
  expectLabels('lxd_filesystem_size_bytes', ['device', 'fstype', 'mountpoint', 'name', 'project']);
  expectLabels('lxd_filesystem_free_bytes', ['device', 'fstype', 'mountpoint', 'name', 'project']);
  expectLabels('lxd_filesystem_avail_bytes', ['device', 'fstype', 'mountpoint', 'name', 'project']);
  for (const m of ['Active_anon', 'Active_file', 'Active', 'Cached', 'Dirty', 'Inactive_anon', 'Inactive_file', 'Inactive', 'Mapped',
    'MemAvailable', 'MemFree', 'MemTotal', 'RSS', 'Shmem', 'Swap', 'Unevictable', 'Writeback']) {
    expectLabels(`lxd_memory_${m}_bytes`, ['name', 'project', 'type']);
    t.is(families.get(`lxd_memory_${m}_bytes`)!.type, 'gauge');
  }
  for (const dir of ['receive', 'transmit']) {
    for (const what of ['bytes', 'drop', 'errs', 'packets']) {
      expectLabels(`lxd_network_${dir}_${what}_total`, ['device', 'name', 'project', 'type']);
      t.is(families.get(`lxd_network_${dir}_${what}_total`)!.type, 'counter');
    }
  }
  expectLabels('lxd_procs_total', ['name', 'project', 'type']);
  t.is(families.get('lxd_cpu_seconds_total')!.type, 'counter');
  t.is(families.get('lxd_procs_total')!.type, 'gauge');
  for (const [name, f] of families) {
    t.true(name.startsWith('lxd_'), name);
    t.true(f.help.length > 0, `${name} has help`);
  }
  // Go runtime figures have no meaning here and are not invented.
  t.false([...families.keys()].some((n) => n.startsWith('lxd_go_')));
});

test.serial('values match the container\'s cgroup, network namespace and root volume (metrics_cpu_seconds)', async (t) => {
  const state = (await d.request('GET', '/1.0/instances/run1/state')).json.metadata;
  const { families } = await scrape('?project=default');
  const procs = seriesOf(families, 'lxd_procs_total', 'run1');
  t.is(procs.length, 1);
  t.deepEqual(procs[0]!.labels, { name: 'run1', project: 'default', type: 'container' });
  const pidsCurrent = Number(readFileSync(cgroupFileOf(state.pid, 'pids', 'pids.current', 'pids.current'), 'utf8'));
  t.true(procs[0]!.value >= 1 && Math.abs(procs[0]!.value - pidsCurrent) <= 1, `procs ${procs[0]!.value} vs pids.current ${pidsCurrent}`);

  // CPU time in seconds (metrics_cpu_seconds), both modes per CPU, summing to at most the cgroup's usage.
  const cpu = seriesOf(families, 'lxd_cpu_seconds_total', 'run1');
  t.true(cpu.length >= 2);
  t.deepEqual([...new Set(cpu.map((s) => s.labels.mode))].sort(), ['system', 'user']);
  const seconds = cpu.reduce((sum, s) => sum + s.value, 0);
  t.true(seconds >= 0 && seconds < 60, `cpu seconds ${seconds} read as seconds, not nanoseconds`);
  t.true(seconds <= state.cpu.usage / 1e9 + 0.5, `cpu seconds ${seconds} vs state usage ${state.cpu.usage} ns`);

  // The memory limit is the instance's total; free is total less what it uses.
  const mem = (m: string) => seriesOf(families, `lxd_memory_${m}_bytes`, 'run1')[0]!.value;
  t.is(mem('MemTotal'), MEMORY_LIMIT);
  t.true(mem('MemFree') > 0 && mem('MemFree') < MEMORY_LIMIT);
  t.is(mem('MemAvailable'), mem('MemFree') + mem('Cached'));
  t.is(mem('Active'), mem('Active_anon') + mem('Active_file'));
  t.is(mem('Inactive'), mem('Inactive_anon') + mem('Inactive_file'));
  t.true(mem('RSS') > 0);

  // The root disk is the instance volume: statfs of the same filesystem.
  const fs = seriesOf(families, 'lxd_filesystem_size_bytes', 'run1');
  t.is(fs.length, 1);
  t.is(fs[0]!.labels.mountpoint, '/');
  const df = spawnSync('df', ['-B1', '--output=size', `${d.dir}`], { encoding: 'utf8' }).stdout.trim().split('\n').pop()!;
  t.is(fs[0]!.value, Number(df));

  // Interfaces of the container's own network namespace (it has no nic here): its loopback, none of the host's.
  t.deepEqual(seriesOf(families, 'lxd_network_receive_bytes_total', 'run1').map((s) => s.labels.device), ['lo']);
});

test.serial('only running instances appear; a stop shows in the next scrape', async (t) => {
  let { families } = await scrape();
  t.is(seriesOf(families, 'lxd_procs_total', 'idle1').length, 0, 'a stopped instance has no series');
  t.is(seriesOf(families, 'lxd_procs_total', 'run1').length, 1);
  ok(await callAndWait(d, 'PUT', '/1.0/instances/run1/state', { action: 'stop', force: true }), 'stop run1');
  ({ families } = await scrape());
  t.is(seriesOf(families, 'lxd_procs_total', 'run1').length, 0, 'gone at once, not after the cache expires');
  t.is([...families.values()].flatMap((f) => f.samples).filter((s) => s.labels.name === 'run1').length, 0);
  ok(await callAndWait(d, 'PUT', '/1.0/instances/run1/state', { action: 'start' }), 'start run1');
  ({ families } = await scrape());
  t.is(seriesOf(families, 'lxd_procs_total', 'run1').length, 1);
});

test.serial('project filtering: every project by default, one with ?project=, daemon figures only unfiltered', async (t) => {
  const all = (await scrape()).families;
  const projectsOf = (f: Map<string, ParsedFamily>) => [...new Set(f.get('lxd_procs_total')!.samples.map((s) => `${s.labels.project}/${s.labels.name}`))].sort();
  t.deepEqual(projectsOf(all), ['default/run1', 'p2/run2']);
  t.is(all.get('lxd_uptime_seconds')?.samples.length, 1);
  t.true(all.get('lxd_uptime_seconds')!.samples[0]!.value >= 0);
  t.is(all.get('lxd_operations_total')?.samples[0]?.value, 0);

  const p2 = (await scrape('?project=p2')).families;
  t.deepEqual(projectsOf(p2), ['p2/run2']);
  t.false(p2.has('lxd_uptime_seconds'));
  const def = (await scrape('?project=default')).families;
  t.deepEqual(projectsOf(def), ['default/run1']);
  // An unknown project is refused as everywhere else (the reference answers an empty text instead).
  const unknown = await d.request('GET', '/1.0/metrics?project=nowhere');
  t.is(unknown.status, 404, unknown.body);
  t.is(unknown.json?.type, 'error');
  // all-projects lists each instance once.
  t.deepEqual(projectsOf((await scrape('?all-projects=true')).families), ['default/run1', 'p2/run2']);
});

test.serial('promtool reads the text (Debian prometheus): no parse error, lint notes only on the reference\'s own names', async (t) => {
  const { text } = await scrape();
  const res = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  t.is(res.error, undefined, 'promtool runs');
  t.not(res.status, 1, `parse error: ${res.stdout}${res.stderr}`);
  t.false(/error while linting/.test(res.stdout + res.stderr));
  // Names the reference chose (and dashboards use) that promtool's style lint dislikes; nothing else may be reported.
  const notes = (res.stdout + res.stderr).split('\n').filter(Boolean);
  const allowed = /^lxd_memory_Mem(Available|Free|Total)_bytes metric names should be written in 'snake_case'|^lxd_procs_total non-counter metrics should not have "_total" suffix|^lxd_operations_total non-counter metrics should not have "_total" suffix/;
  for (const note of notes) t.regex(note, allowed);
});

test.serial('other verbs are refused with the error envelope', async (t) => {
  const res = await d.request('POST', '/1.0/metrics', {});
  t.is(res.status, 400);
  t.is(res.json.type, 'error');
});
