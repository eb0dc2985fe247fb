/** The real `lxc` client (Debian lxd-client 5.0.2) against corral's unix socket. */
import test from 'ava';
import path from 'node:path';
import { spawn } from 'node:child_process';
import os from 'node:os';
import { projectRoot, startDaemon, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcEnv } from '../helpers/clients.js';

const fixtureArgs = { plugins: 'test', args: ['--registry', path.join(projectRoot, 'test', 'fixtures', 'registry.json')] };

let d: Daemon;
test.before(async () => {
  d = await startDaemon(fixtureArgs);
});
test.after.always(async () => {
  await d?.stop();
});

test.serial('lxc info shows the server, and --resources the hardware of the full build', async (t) => {
  const info = await lxc(d.socket, 'info');
  t.is(info.status, 0, info.stderr);
  t.regex(info.stdout, /auth: trusted/);
  t.regex(info.stdout, /api_extensions:/);
  t.regex(info.stdout, /- etag/);
  t.regex(info.stdout, /server_name: \S+/);
  t.regex(info.stdout, /kernel_version: \S+/);
  const full = await startDaemon({ plugins: 'full' });
  try {
    const resources = await lxc(full.socket, 'info', '--resources');
    t.is(resources.status, 0, resources.stderr);
    t.true(resources.stdout.includes(`CPU (${os.machine()}):`), resources.stdout);
    t.is((resources.stdout.match(/\(id: \d+, online: true/g) ?? []).length, os.cpus().length, 'one thread line per cpu');
    t.regex(resources.stdout, /Memory:/);
    t.regex(resources.stdout, /Disks?:/);
  } finally {
    await full.stop();
  }
});

test.serial('lxc query and lxc config set/get/unset go through GET, PUT with ETag', async (t) => {
  const query = await lxc(d.socket, 'query', '/1.0');
  t.is(query.status, 0, query.stderr);
  const server = JSON.parse(query.stdout);
  t.is(server.api_version, '1.0');
  t.true(server.api_extensions.includes('warnings'));
  t.is((await lxc(d.socket, 'config', 'set', 'user.greeting', 'hello')).status, 0);
  t.is((await lxc(d.socket, 'config', 'get', 'user.greeting')).stdout.trim(), 'hello');
  const bad = await lxc(d.socket, 'config', 'set', 'core.bogus', 'x');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /core\.bogus/);
  t.is((await lxc(d.socket, 'config', 'unset', 'user.greeting')).status, 0);
  t.is((await lxc(d.socket, 'config', 'get', 'user.greeting')).stdout.trim(), '');
  const missing = await lxc(d.socket, 'query', '/1.0/nope');
  t.not(missing.status, 0);
  t.regex(missing.stderr, /not found/i);
});

test.serial('lxc operation list, show and delete', async (t) => {
  await d.request('POST', '/1.0/probes', { name: 'ops' });
  const op = await d.request('POST', '/1.0/probes/ops/jobs', { ms: 30000 });
  const id = op.json.metadata.id as string;
  const list = await lxc(d.socket, 'operation', 'list', '--format', 'csv');
  t.is(list.status, 0, list.stderr);
  t.regex(list.stdout, new RegExp(`${id},TASK,Running probe job,RUNNING,YES`));
  const show = await lxc(d.socket, 'operation', 'show', id);
  t.regex(show.stdout, /status: Running/);
  t.is((await lxc(d.socket, 'operation', 'delete', id)).status, 0);
  const after = await d.request('GET', `/1.0/operations/${id}/wait?timeout=5`);
  t.is(after.json.metadata.status, 'Cancelled');
});

test.serial('lxc warning list, show, ack and delete', async (t) => {
  await d.request('POST', '/1.0/probes', { name: 'noisy' });
  await d.request('POST', '/1.0/probes/noisy/warn');
  const list = await lxc(d.socket, 'warning', 'list', '--format', 'csv');
  t.is(list.status, 0, list.stderr);
  t.regex(list.stdout, /Probe complaint/);
  const uuid = (await d.request('GET', '/1.0/warnings')).json.metadata[0].split('/').pop();
  t.regex((await lxc(d.socket, 'warning', 'show', uuid)).stdout, /status: new/);
  t.is((await lxc(d.socket, 'warning', 'ack', uuid)).status, 0);
  t.is((await d.request('GET', `/1.0/warnings/${uuid}`)).json.metadata.status, 'acknowledged');
  t.is((await lxc(d.socket, 'warning', 'delete', uuid)).status, 0);
  t.is((await d.request('GET', `/1.0/warnings/${uuid}`)).status, 404);
});

test.serial('lxc monitor prints lifecycle events as they happen', async (t) => {
  const monitor = spawn('lxc', ['monitor', '--type=lifecycle', '--format', 'json'], { env: lxcEnv(d.socket) });
  let out = '';
  monitor.stdout.on('data', (c) => (out += c));
  monitor.stderr.on('data', (c) => (out += c));
  // Cause events until lxc has attached its websocket and prints one (no fixed sleep: slow machines attach late).
  let round = 0;
  await waitFor(async () => {
    await d.request('PATCH', '/1.0', { config: { 'user.watched': String(round++) } });
    await new Promise((r) => setTimeout(r, 250));
    return out.includes('config-updated');
  }, 20000, 'lxc monitor output');
  monitor.kill('SIGINT');
  t.regex(out, /"action": ?"config-updated"/);
  t.regex(out, /"source": ?"\/1\.0"/);
});
