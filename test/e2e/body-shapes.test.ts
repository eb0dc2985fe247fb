/**
 * Bodies that are not bodies: for every collection create and every object write, an empty body,
 * invalid JSON, a JSON array, a string, null and fields of the wrong type are refused with a 400
 * error envelope of our own wording, before anything is created, changed or started.
 */
import test from 'ava';
import { startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { callAndWait, importImage, mustSucceed } from '../helpers/api.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { selfSigned } from '../helpers/pki.js';
import { lxc } from '../helpers/clients.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const NOT_OBJECTS: [string, string][] = [
  ['an empty body', ''],
  ['invalid JSON', '{"name": '],
  ['a JSON array', '[{"name":"x"}]'],
  ['a JSON string', '"x"'],
  ['a JSON number', '42'],
  ['null', 'null'],
];

const net = `hbs${process.pid % 10000}`;
const listen = '198.51.100.7';
const cert = selfSigned(mkdtempSync(path.join(tmpdir(), 'corral-certs-')), 'sweep');
let d: Daemon;
let fingerprint: string;

/** Collections and their create requests of the wrong shape (a fresh name each, so a wrong success would show). */
const creates = (): [string, Record<string, unknown>[]][] => [
  ['/1.0/instances', [
    { name: 'bad1', config: { 'user.a': 1 }, source: { type: 'none' } },
    { name: 'bad2', devices: { root: 'disk' }, source: { type: 'none' } },
    { name: 'bad3', devices: 'none', source: { type: 'none' } },
    { name: 'bad4', devices: { eth0: { type: 'nic', mtu: 1500 } }, source: { type: 'none' } },
    { name: 'bad5', profiles: 'default', source: { type: 'none' } },
    { name: 'bad6', profiles: ['default', 7], source: { type: 'none' } },
    { name: 'bad7', source: 'none' },
    { name: 'bad8', source: { type: 'none', alias: 5 } },
    { name: 'bad9', source: { type: 7 } },
    { name: 'bad10', architecture: 64, source: { type: 'none' } },
    { name: 'bad11', type: ['container'], source: { type: 'none' } },
    { name: 'bad12', description: { text: 'x' }, source: { type: 'none' } },
    { name: 'bad13', ephemeral: 'yes', source: { type: 'none' } },
    { name: 14, source: { type: 'none' } },
  ]],
  ['/1.0/instances/c1/snapshots', [{ name: 5 }, { name: 'bad', stateful: 'no' }, { name: 'bad', expires_at: 12 }]],
  ['/1.0/instances/c1/backups', [{ name: 5 }, { name: 'bad', instance_only: 'yes' }]],
  ['/1.0/profiles', [{ name: 'bad', config: { 'user.a': 1 } }, { name: 'bad', devices: { d: { type: 1 } } }, { name: 'bad', description: 1 }, { name: ['bad'] }]],
  ['/1.0/projects', [{ name: 'bad', config: { 'features.images': true } }, { name: 'bad', description: 1 }, { name: 1 }]],
  ['/1.0/networks', [{ name: 'hbbad', config: { 'ipv4.address': false } }, { name: 'hbbad', type: 1 }, { name: 'hbbad', config: 'none' }]],
  ['/1.0/network-acls', [{ name: 'bad', ingress: 'allow' }, { name: 'bad', egress: ['allow'] }, { name: 'bad', config: { 'user.a': 1 } }]],
  [`/1.0/networks/${net}/forwards`, [{ listen_address: '198.51.100.8', ports: 'tcp' }, { listen_address: 5 }, { listen_address: '198.51.100.8', config: { 'user.a': 1 } }]],
  ['/1.0/storage-pools', [{ name: 'bad', driver: 'dir', config: { size: 1 } }, { name: 'bad', driver: 1 }, { name: 'bad', driver: 'dir', description: 1 }]],
  ['/1.0/storage-pools/default/volumes/custom', [{ name: 'bad', config: { size: 1 } }, { name: 'bad', source: 'v1' }, { name: 5 }]],
  ['/1.0/storage-pools/default/volumes/custom/v1/snapshots', [{ name: 5 }, { name: 'bad', expires_at: 5 }]],
  ['/1.0/storage-pools/default/volumes/custom/v1/backups', [{ name: 5 }, { name: 'bad', volume_only: 'yes' }]],
  ['/1.0/images', [{ source: 'c1' }, { source: { type: 'instance', name: 'c1' }, aliases: 'x' }, { source: { type: 'instance', name: 'c1' }, public: 'yes' }, { source: { type: 'instance', name: 'c1' }, properties: { os: 1 } }]],
  ['/1.0/images/aliases', [{ name: 'bad', target: 5 }, { name: 'bad', description: 1, target: 'x' }]],
  ['/1.0/certificates', [{ type: 'client', certificate: 5 }, { type: 'client', restricted: 'yes' }, { type: 'client', projects: 'default' }]],
];

/** Objects and wrong-shaped writes of them (each is sent as PUT and as PATCH). */
const objects = (): [string, Record<string, unknown>[]][] => [
  ['/1.0/instances/c1', [{ config: { 'user.a': 1 } }, { devices: { x: 'none' } }, { profiles: 'default' }, { description: 1 }, { architecture: 1 }, { ephemeral: 'no' }]],
  ['/1.0/instances/c1/snapshots/s1', [{ expires_at: 5 }]],
  ['/1.0/instances/c1/metadata', [{ properties: { os: 1 } }, { architecture: 1 }, { templates: 'none' }]],
  ['/1.0/profiles/default', [{ config: { 'user.a': 1 } }, { devices: { x: { type: 1 } } }, { description: [] }]],
  ['/1.0/projects/default', [{ config: { 'features.images': false } }, { description: 1 }]],
  [`/1.0/networks/${net}`, [{ config: { 'ipv4.nat': true } }, { description: 1 }]],
  ['/1.0/network-acls/acl1', [{ ingress: 'allow' }, { config: { 'user.a': 1 } }]],
  [`/1.0/networks/${net}/forwards/${listen}`, [{ ports: 'tcp' }, { config: { 'target_address': 1 } }]],
  ['/1.0/storage-pools/default', [{ config: { size: 1 } }, { description: 1 }]],
  ['/1.0/storage-pools/default/volumes/custom/v1', [{ config: { size: 1 } }, { description: 1 }]],
  ['/1.0/storage-pools/default/volumes/custom/v1/snapshots/s1', [{ description: 1 }, { expires_at: 1 }]],
  ['/1.0/images/{fp}', [{ public: 'yes' }, { properties: { os: 1 } }, { profiles: 'default' }]],
  ['/1.0/images/aliases/bb', [{ target: 5 }, { description: 1 }]],
  ['/1.0/certificates/{cert}', [{ restricted: 'yes' }, { projects: 'default' }, { name: 1 }]],
  ['/1.0', [{ config: { 'core.https_address': 8443 } }, { config: 'none' }]],
];

/** Renames and moves: the same rules for their bodies. */
const renames = ['/1.0/instances/c1', '/1.0/instances/c1/snapshots/s1', '/1.0/profiles/p1', '/1.0/projects/pr1', `/1.0/networks/${net}`,
  '/1.0/network-acls/acl1', '/1.0/storage-pools/default/volumes/custom/v1', '/1.0/storage-pools/default/volumes/custom/v1/snapshots/s1', '/1.0/images/aliases/bb'];

/** Actions on an instance: their bodies too. */
const actions: [string, string, Record<string, unknown>[]][] = [
  ['PUT', '/1.0/instances/c1/state', [{ action: 'start', timeout: '30' }, { action: 5 }, { action: 'start', force: 'yes' }]],
  ['PUT', '/1.0/instances', [{ state: 'start' }]],
  ['POST', '/1.0/instances/c1/console', [{ width: '80' }, { type: 1 }]],
  ['POST', '/1.0/instances/c1/exec', [{ command: ['true'], 'wait-for-websocket': 'yes' }, { command: ['true'], 'record-output': 1 }, { command: ['true'], environment: { A: 1 } }]],
];

const expand = (url: string) => url.replace('{fp}', fingerprint).replace('{cert}', cert.fingerprint);

/** The daemon's own housekeeping runs as operations too, at times of its choosing: not what a request made. */
const HOUSEKEEPING = /^(Cleaning up expired|Expiring log files|Creating scheduled snapshots)/;

/** Operations started by requests (finished ones are listed for a few seconds only: compare what is new). */
async function operations(): Promise<Set<string>> {
  const byStatus = (await d.request('GET', '/1.0/operations?recursion=1')).json.metadata as Record<string, { id: string; description: string }[]>;
  return new Set(Object.values(byStatus).flat().filter((op) => !HOUSEKEEPING.test(op.description)).map((op) => `${op.id} ${op.description}`));
}

const newOperations = async (before: Set<string>) => [...await operations()].filter((op) => !before.has(op));

/** Everything a request could have created or changed, as the API shows it. */
async function everything(): Promise<Record<string, unknown>> {
  const urls = [
    '/1.0/instances?recursion=1', '/1.0/instances/c1/snapshots?recursion=1', '/1.0/instances/c1/backups', '/1.0/profiles?recursion=1', '/1.0/projects?recursion=1',
    '/1.0/networks?recursion=1', '/1.0/network-acls?recursion=1', `/1.0/networks/${net}/forwards?recursion=1`, '/1.0/storage-pools?recursion=1',
    '/1.0/storage-pools/default/volumes?recursion=1', '/1.0/storage-pools/default/volumes/custom/v1/snapshots?recursion=1',
    '/1.0/storage-pools/default/volumes/custom/v1/backups', '/1.0/images?recursion=1', '/1.0/images/aliases?recursion=1',
    '/1.0/certificates?recursion=1', '/1.0', '/1.0/instances/c1/metadata',
  ];
  const out: Record<string, unknown> = {};
  for (const url of urls) {
    const res = await d.request('GET', url);
    if (res.status !== 200) throw new Error(`GET ${url}: ${res.body}`);
    // The host's own interfaces come and go with whatever else runs on the machine: only managed networks count.
    out[url] = url.startsWith('/1.0/networks?') ? res.json.metadata.filter((n: { managed: boolean }) => n.managed) : res.json.metadata;
  }
  return out;
}

const must = (method: string, url: string, body?: unknown): Promise<void> => mustSucceed(d, method, url, body);

test.before(async () => {
  d = await startDaemon({ args: ['--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
  const image = buildBusyboxImage('gzip');
  fingerprint = await importImage(d, image.unified, 'bb');
  await must('POST', '/1.0/instances', { name: 'c1', source: { type: 'none' } });
  await must('POST', '/1.0/instances/c1/snapshots', { name: 's1' });
  await must('POST', '/1.0/profiles', { name: 'p1' });
  await must('POST', '/1.0/projects', { name: 'pr1' });
  await must('POST', '/1.0/networks', { name: net, config: { 'ipv4.address': 'auto', 'ipv6.address': 'none' } });
  await must('POST', `/1.0/networks/${net}/forwards`, { listen_address: listen });
  await must('POST', '/1.0/network-acls', { name: 'acl1' });
  await must('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'v1' });
  await must('POST', '/1.0/storage-pools/default/volumes/custom/v1/snapshots', { name: 's1' });
  await must('POST', '/1.0/certificates', { type: 'client', name: 'sweep', certificate: cert.base64, restricted: true, projects: ['pr1'] });
});

test.after.always(async () => {
  await d?.request('DELETE', `/1.0/networks/${net}/forwards/${listen}`).catch(() => undefined);
  await d?.request('DELETE', `/1.0/networks/${net}`).catch(() => undefined);
  await stopDaemons();
});

/** A 400 error envelope whose message is ours: one line, no library error names, no stack. */
function refused(t: import('ava').ExecutionContext, res: { status: number; json: any; body: string }, what: string): void {
  t.is(res.status, 400, `${what}: ${res.body}`);
  t.is(res.json?.type, 'error', what);
  t.is(res.json?.error_code, 400, what);
  const message = String(res.json?.error ?? '');
  t.true(message.length > 0 && message.length < 200, `${what}: ${message}`);
  t.notRegex(message, /\n|ValidationError|SyntaxError|\bat \S+:\d+|must be of type|"value"/, `${what}: ${message}`);
}

const send = (method: string, url: string, body: string) => d.request(method, url, body, { 'content-type': 'application/json' });

test.serial('collection creates refuse bodies that are not JSON objects, and fields of the wrong type', async (t) => {
  const before = await everything();
  const ops = await operations();
  for (const [url, wrong] of creates()) {
    for (const [what, body] of NOT_OBJECTS) refused(t, await send('POST', url, body), `POST ${url} with ${what}`);
    for (const body of wrong) refused(t, await send('POST', url, JSON.stringify(body)), `POST ${url} ${JSON.stringify(body)}`);
  }
  t.deepEqual(await newOperations(ops), [], 'no operation was started');
  t.deepEqual(await everything(), before, 'nothing was created or changed');
});

test.serial('object writes (PUT, PATCH, rename, state, console) refuse bodies that are not JSON objects, and fields of the wrong type', async (t) => {
  const before = await everything();
  const ops = await operations();
  for (const [pattern, wrong] of objects()) {
    const url = expand(pattern);
    for (const method of ['PUT', 'PATCH']) {
      for (const [what, body] of NOT_OBJECTS) refused(t, await send(method, url, body), `${method} ${url} with ${what}`);
      for (const body of wrong) refused(t, await send(method, url, JSON.stringify(body)), `${method} ${url} ${JSON.stringify(body)}`);
    }
  }
  for (const url of renames) {
    for (const [what, body] of NOT_OBJECTS) refused(t, await send('POST', url, body), `POST ${url} with ${what}`);
    refused(t, await send('POST', url, JSON.stringify({ name: 5 })), `POST ${url} with a numeric name`);
  }
  for (const [method, url, wrong] of actions) {
    for (const [what, body] of NOT_OBJECTS) refused(t, await send(method, url, body), `${method} ${url} with ${what}`);
    for (const body of wrong) {
      const res = await send(method, url, JSON.stringify(body));
      refused(t, res, `${method} ${url} ${JSON.stringify(body)}`);
      // The shape is what refused it, not a later check (exec on a stopped instance is refused too).
      t.regex(String(res.json?.error), /^Invalid request body: /, `${method} ${url} ${JSON.stringify(body)}`);
    }
  }
  t.deepEqual(await newOperations(ops), [], 'no operation was started');
  t.deepEqual(await everything(), before, 'nothing was created or changed');
});

test.serial('a JSON object without a name, or with an empty one (as lxc sends it), creates an instance with a generated name', async (t) => {
  for (const body of [{ source: { type: 'none' } }, { name: '', source: { type: 'none' } }]) {
    const res = await callAndWait(d, 'POST', '/1.0/instances', body);
    t.is(res.op?.status, 'Success', res.body);
    const name = (res.op.resources.instances[0] as string).split('/').pop()!;
    t.regex(name, /^[a-z]+-[a-z]+$/);
    t.is((await callAndWait(d, 'DELETE', `/1.0/instances/${name}`)).op?.status, 'Success');
  }
});

test.serial('lxc init --empty without a name creates an instance (the client sends an empty name)', async (t) => {
  const before = new Set((await d.request('GET', '/1.0/instances')).json.metadata as string[]);
  const run = await lxc(d.socket, 'init', '--empty');
  t.is(run.status, 0, run.stderr);
  const made = ((await d.request('GET', '/1.0/instances')).json.metadata as string[]).filter((url) => !before.has(url));
  t.is(made.length, 1, made.join(', '));
  t.is((await callAndWait(d, 'DELETE', made[0]!)).op?.status, 'Success');
});
