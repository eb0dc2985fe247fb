/**
 * Instance API details through a real daemon: descriptions, instance types, all-projects listing,
 * exec over websockets with control messages; and a check that every extension name the instances
 * plugin claims is named by a test that exercises it.
 */
import test from 'ava';
import { claimsNamed } from '../helpers/claims.js';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type WebSocket from 'ws';
import { projectRoot, waitFor, type Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { callAndWait } from '../helpers/api.js';

let d: Daemon;

const call = (method: string, url: string, body?: unknown) => callAndWait(d, method, url, body);

test.before(async () => {
  d = await startWithImage();
});

test.after.always(stopImageDaemons);

test.serial('description (entity_description) and instance_type (instance_types) at creation', async (t) => {
  const created = await call('POST', '/1.0/instances', { name: 'typed', description: 'a typed one', instance_type: 't2.micro', source: { type: 'image', alias: 'bb' } });
  t.is(created.op.status, 'Success', created.op.err);
  const inst = (await call('GET', '/1.0/instances/typed')).json.metadata;
  t.is(inst.description, 'a typed one');
  t.is(inst.config['limits.cpu'], '1');
  t.is(inst.config['limits.memory'], '1024MiB');
  t.is((await call('PATCH', '/1.0/instances/typed', { description: 'renamed text' })).status, 200);
  t.is((await call('GET', '/1.0/instances/typed')).json.metadata.description, 'renamed text');
  const bad = await call('POST', '/1.0/instances', { name: 'untyped', instance_type: 'no.such.type', source: { type: 'image', alias: 'bb' } });
  t.is(bad.status, 400);
  t.is((await call('GET', '/1.0/instances/untyped')).status, 404);
  await call('DELETE', '/1.0/instances/typed');
});

test.serial('all-projects lists every project\'s instances with their project (instance_all_projects)', async (t) => {
  await call('POST', '/1.0/instances', { name: 'everywhere', source: { type: 'image', alias: 'bb' } });
  const all = (await call('GET', '/1.0/instances?all-projects=true&recursion=1')).json.metadata;
  t.deepEqual(all.map((i: any) => [i.name, i.project]), [['everywhere', 'default']]);
  t.deepEqual((await call('GET', '/1.0/instances?all-projects=true')).json.metadata, ['/1.0/instances/everywhere']);
  await call('DELETE', '/1.0/instances/everywhere');
});

function open(url: string): Promise<WebSocket> {
  return d.websocket(url);
}

test.serial('exec over websockets: output streams, a forwarded SIGTERM, the exit status (container_exec_signal_handling)', async (t) => {
  await call('POST', '/1.0/instances', { name: 'signals', source: { type: 'image', alias: 'bb' } });
  await call('PUT', '/1.0/instances/signals/state', { action: 'start' });
  try {
    const script = 'trap "echo got-term; exit 9" TERM; echo ready; while true; do sleep 0.1; done';
    const res = await d.request('POST', '/1.0/instances/signals/exec', { command: ['sh', '-c', script], 'wait-for-websocket': true, interactive: false });
    t.is(res.status, 202);
    const opUrl: string = res.json.operation;
    const fds = res.json.metadata.metadata.fds;
    t.deepEqual(Object.keys(fds).sort(), ['0', '1', '2', 'control']);
    const socket = (name: string) => open(`${opUrl}/websocket?secret=${fds[name]}`);
    const [control, stdin, stdout, stderr] = await Promise.all([socket('control'), socket('0'), socket('1'), socket('2')]);
    let out = '';
    stdout.on('message', (data) => (out += String(data)));
    stderr.on('message', () => undefined);
    await waitFor(() => out.includes('ready'), 10000, 'the command to start');
    control.send(JSON.stringify({ command: 'signal', signal: 15 }));
    const op = (await d.request('GET', `${opUrl}/wait?timeout=30`)).json.metadata;
    t.is(op.status, 'Success');
    t.is(op.metadata.return, 9, 'the trap ran and chose the exit status');
    t.true(out.includes('got-term'));
    stdin.close();
  } finally {
    await call('PUT', '/1.0/instances/signals/state', { action: 'stop', force: true });
    await call('DELETE', '/1.0/instances/signals');
  }
});

test.serial('a start records the id map in effect as volatile.idmap.current (id_map_current), as the kernel shows it', async (t) => {
  await call('POST', '/1.0/instances', { name: 'mapped', source: { type: 'image', alias: 'bb' } });
  t.is((await call('GET', '/1.0/instances/mapped')).json.metadata.config['volatile.idmap.current'], undefined, 'not before a start');
  await call('PUT', '/1.0/instances/mapped/state', { action: 'start' });
  try {
    const config = (await call('GET', '/1.0/instances/mapped')).json.metadata.config;
    const current = JSON.parse(config['volatile.idmap.current']);
    t.deepEqual(current, JSON.parse(config['volatile.idmap.next']));
    const pid = (await call('GET', '/1.0/instances/mapped/state')).json.metadata.pid;
    const [nsid, hostid, range] = readFileSync(`/proc/${pid}/uid_map`, 'utf8').trim().split(/\s+/).map(Number);
    const uid = current.find((e: any) => e.Isuid);
    t.deepEqual([uid.Nsid, uid.Hostid, uid.Maprange], [nsid, hostid, range]);
  } finally {
    await call('PUT', '/1.0/instances/mapped/state', { action: 'stop', force: true });
    await call('DELETE', '/1.0/instances/mapped');
  }
});

test('every extension name the instances plugin claims is named by a test that exercises it', (t) => {
  // The plugin's own name is exercised by every instance test.
  t.deepEqual(claimsNamed('instances').unnamed.filter((name) => name !== 'instances'), []);
});
