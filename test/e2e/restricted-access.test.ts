/**
 * What restricted callers and restricted projects see, through the real `lxc` (compared with the
 * reference, LXD 5.0.2, step by step):
 * - a restricted certificate with no projects lists projects, pools, images, operations and
 *   certificates as empty or shared lists (200), and is refused (403) only where it names a
 *   project it may not use; one with a project sees that project and only its users of shared things;
 * - events: any trusted listener may connect; a restricted one hears only its own projects;
 * - a restricted project hides the networks it may not use (`restricted.devices.nic=block`,
 *   `restricted.networks.access`, host interfaces) from lists and from GET of one.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithImage, stopImageDaemons, type ImageDaemon } from '../helpers/image-daemon.js';
import { lxc, lxcOk, type ClientRun, collectRun } from '../helpers/clients.js';
import { selfSigned, type ClientCert } from '../helpers/pki.js';
import { freePort, tlsRequest, tlsWebsocket, type TlsTarget } from '../helpers/tls-client.js';
import { uniqueName } from '../helpers/netns.js';
import { referenceUnavailable, startReference } from '../helpers/reference-daemon.js';

const noReference = referenceUnavailable();
const interop = noReference ? test.skip : test.serial;

let d: ImageDaemon;
/** The busybox tarball the corral daemon imported, for the reference to import too. */
const image = () => d.image.unified;
let target: TlsTarget;
let url = '';
const scratch = mkdtempSync(path.join(tmpdir(), 'corral-restricted-'));
let none: ClientCert;
let one: ClientCert;
const homes: Record<string, string> = {};
const bridges: string[] = [];

/** `lxc` as a remote user with the given certificate as its client certificate, and no LXD_SOCKET. */
function remoteLxc(who: string, ...args: string[]): Promise<ClientRun> {
  const { LXD_SOCKET: _s, LXD_DIR: _d, ...env } = process.env;
  const child = spawn('lxc', args, { env: { ...env, LXD_CONF: homes[who], HOME: homes[who] } });
  child.stdin.end();
  return collectRun(child, 60_000);
}

async function remoteOk(t: any, who: string, ...args: string[]): Promise<string> {
  const res = await remoteLxc(who, ...args);
  t.is(res.status, 0, `lxc ${args.join(' ')} (${who}): ${res.stderr}`);
  return res.stdout;
}

function homeFor(cert: ClientCert): string {
  const home = mkdtempSync(path.join(scratch, `home-${cert.name}-`));
  copyFileSync(cert.certFile, path.join(home, 'client.crt'));
  copyFileSync(cert.keyFile, path.join(home, 'client.key'));
  return home;
}

test.before(async () => {
  d = await startWithImage({ plugins: 'full' });
  const port = await freePort();
  target = { host: '127.0.0.1', port };
  url = `https://127.0.0.1:${port}`;
  await lxc(d.socket, 'config', 'set', 'core.https_address', `127.0.0.1:${port}`);
  await lxc(d.socket, 'project', 'create', 'p1', '-c', 'features.images=false');
  await lxc(d.socket, 'profile', 'device', 'add', 'default', 'root', 'disk', 'path=/', 'pool=default', '--project', 'p1');
  none = selfSigned(scratch, 'none');
  one = selfSigned(scratch, 'one');
  await lxc(d.socket, 'config', 'trust', 'add', none.certFile, '--restricted', '--name', 'none');
  await lxc(d.socket, 'config', 'trust', 'add', one.certFile, '--restricted', '--projects', 'p1', '--name', 'one');
  homes.none = homeFor(none);
  homes.one = homeFor(one);
  for (const who of ['none', 'one']) {
    const added = await remoteLxc(who, 'remote', 'add', 'r', url, '--accept-certificate');
    if (added.status !== 0) throw new Error(`remote add (${who}): ${added.stderr}`);
  }
});

test.after.always(async () => {
  for (const name of bridges) await d?.request('DELETE', `/1.0/networks/${name}`).catch(() => undefined);
  await stopImageDaemons();
  rmSync(scratch, { recursive: true, force: true });
});

test.serial('a restricted certificate with no projects: empty or shared lists, 403 where it names a project', async (t) => {
  await lxcOk(t, d.socket, 'init', 'bb', 'c0');
  // The listings the reference answers with 200.
  t.is((await remoteOk(t, 'none', 'project', 'list', 'r:', '--format', 'csv')).trim(), '');
  for (const p of ['/1.0/projects', '/1.0/projects?recursion=1', '/1.0/operations', '/1.0/operations?all-projects=true', '/1.0/images']) {
    const res = await tlsRequest(target, none, 'GET', p);
    t.is(res.status, 200, `${p}: ${res.body}`);
    t.is(Object.keys(res.json.metadata).length, 0, `${p} lists nothing: ${res.body}`);
  }
  // Things every project shares: pools (without their config or other projects' users), the trust store, resources.
  const pools = await tlsRequest(target, none, 'GET', '/1.0/storage-pools?recursion=1');
  t.is(pools.status, 200, pools.body);
  t.is(pools.json.metadata[0].name, 'default');
  t.deepEqual(pools.json.metadata[0].used_by, [], 'the default project\'s instance and profile are not its business');
  t.is(pools.json.metadata[0].config, null);
  t.regex(await remoteOk(t, 'none', 'storage', 'list', 'r:', '--format', 'csv'), /^default,dir,/m);
  t.is((await tlsRequest(target, none, 'GET', '/1.0/storage-pools/default/resources')).status, 200);
  t.is((await tlsRequest(target, none, 'GET', '/1.0/resources')).status, 200);
  t.is((await tlsRequest(target, none, 'GET', '/1.0/certificates')).json.metadata.length, 2);
  t.is((await tlsRequest(target, none, 'GET', `/1.0/certificates/${none.fingerprint}`)).json.metadata.restricted, true);
  // What lives in a project it may not use stays refused, as with the reference.
  for (const p of ['/1.0/instances', '/1.0/profiles', '/1.0/networks', '/1.0/storage-pools/default/volumes', '/1.0/projects/default', '/1.0/projects/nope', '/1.0/instances?all-projects=true']) {
    t.is((await tlsRequest(target, none, 'GET', p)).status, 403, p);
  }
  const list = await remoteLxc('none', 'list', 'r:');
  t.not(list.status, 0);
  t.regex(list.stderr, /Not authorized/);
  await lxcOk(t, d.socket, 'delete', 'c0');
});

test.serial('a restricted certificate with one project: that project, its users of shared things, and its events only', async (t) => {
  await lxcOk(t, d.socket, 'init', 'bb', 'c0');
  t.is((await remoteOk(t, 'one', 'project', 'list', 'r:', '--format', 'csv')).trim().split('\n').map((l) => l.split(',')[0]).join(' '), 'p1 (current)');
  t.regex(await remoteOk(t, 'one', 'project', 'show', 'r:p1'), /name: p1/);
  t.not((await remoteLxc('one', 'project', 'show', 'r:default')).status, 0);
  t.is((await tlsRequest(target, one, 'GET', '/1.0/projects/p1/state')).status, 200);

  // Events: its own project's reach it, the default project's do not.
  const { ws } = await tlsWebsocket(target, one, '/1.0/events?type=lifecycle&all-projects=true');
  t.truthy(ws, 'a restricted listener may connect');
  const seen: any[] = [];
  ws!.on('message', (data) => seen.push(JSON.parse(String(data))));
  const refused = await tlsWebsocket(target, none, '/1.0/events?project=p1');
  t.truthy(refused.ws, 'one with no projects may connect too');
  const noneSeen: any[] = [];
  refused.ws!.on('message', (data) => noneSeen.push(JSON.parse(String(data))));

  // p1 has no images of its own: it lists and uses those of default.
  t.regex(await remoteOk(t, 'one', 'image', 'list', 'r:', '--format', 'csv', '-c', 'l'), /^bb$/m);
  await remoteOk(t, 'one', 'init', 'r:bb', 'r:c1');
  await lxcOk(t, d.socket, 'config', 'set', 'c0', 'user.x', '1');
  t.regex(await remoteOk(t, 'one', 'list', 'r:', '--format', 'csv', '-c', 'n'), /^c1$/m);
  // The pool shows its p1 users to it, and nothing of the default project.
  const pool = await tlsRequest(target, one, 'GET', '/1.0/storage-pools/default?project=p1');
  t.true(pool.json.metadata.used_by.includes('/1.0/instances/c1?project=p1'), pool.body);
  t.false(pool.json.metadata.used_by.some((u: string) => !u.includes('project=p1')), pool.body);
  await new Promise((r) => setTimeout(r, 500));
  t.true(seen.some((e) => e.metadata.source === '/1.0/instances/c1?project=p1'), JSON.stringify(seen));
  t.false(seen.some((e) => e.project !== 'p1'), JSON.stringify(seen));
  t.deepEqual(noneSeen, []);
  // Operations in its project are listed; in the default project, none.
  t.is((await tlsRequest(target, one, 'GET', '/1.0/operations')).json.metadata.success, undefined);
  ws!.close();
  refused.ws!.close();
  await remoteOk(t, 'one', 'delete', 'r:c1');
  await lxcOk(t, d.socket, 'delete', 'c0');
});

test.serial('a restricted project hides the networks it may not use, in lists and in GET of one', async (t) => {
  const [open, allowed] = [uniqueName(), uniqueName()];
  for (const name of [open, allowed]) {
    await lxcOk(t, d.socket, 'network', 'create', name, 'ipv4.address=auto', 'ipv4.nat=false', 'ipv6.address=none');
    bridges.push(name);
  }
  await lxcOk(t, d.socket, 'project', 'create', 'blocked', '-c', 'restricted=true', '-c', 'restricted.devices.nic=block', '-c', 'features.networks=false');
  await lxcOk(t, d.socket, 'project', 'create', 'some', '-c', 'restricted=true', '-c', `restricted.networks.access=${allowed}`, '-c', 'features.networks=false');
  await lxcOk(t, d.socket, 'project', 'create', 'managed', '-c', 'restricted=true', '-c', 'features.networks=false');
  const names = async (project: string) => (await lxcOk(t, d.socket, 'network', 'list', '--project', project, '--format', 'csv'))
    .trim().split('\n').filter(Boolean).map((l) => l.split(',')[0]);

  const all = await names('default');
  t.true(all.includes(open) && all.includes(allowed), all.join(' '));
  const hostInterface = (await d.request('GET', '/1.0/networks?recursion=1')).json.metadata.find((n: any) => !n.managed)?.name;
  t.truthy(hostInterface, 'the host has interfaces corral does not manage');
  t.deepEqual(await names('blocked'), []);
  t.deepEqual(await names('some'), [allowed]);
  t.deepEqual((await names('managed')).sort(), [open, allowed].sort(), 'a restricted project sees no host interface');

  const shown = await lxc(d.socket, 'network', 'show', open, '--project', 'blocked');
  t.not(shown.status, 0);
  t.regex(shown.stderr, /Network not found/);
  t.not((await lxc(d.socket, 'network', 'show', open, '--project', 'some')).status, 0);
  t.regex(await lxcOk(t, d.socket, 'network', 'show', allowed, '--project', 'some'), new RegExp(`name: ${allowed}`));
  t.not((await lxc(d.socket, 'network', 'show', hostInterface, '--project', 'managed')).status, 0);
  t.regex(await lxcOk(t, d.socket, 'network', 'show', hostInterface, '--project', 'default'), /managed: false/);
  t.is((await d.request('GET', `/1.0/networks/${open}/state?project=blocked`)).status, 404);
  for (const p of ['blocked', 'some', 'managed']) await lxcOk(t, d.socket, 'project', 'delete', p);
});

test.serial('image reads open to untrusted peers show a restricted certificate only the private images of its projects', async (t) => {
  const fp = (await d.request('GET', '/1.0/images/aliases/bb')).json.metadata.target as string;
  for (const p of [`/1.0/images/${fp}`, `/1.0/images/${fp}/export`, '/1.0/images/aliases/bb']) {
    t.is((await tlsRequest(target, none, 'GET', p)).status, 404, `${p} (no projects)`);
    t.is((await tlsRequest(target, one, 'GET', `${p}?project=default`)).status, 404, `${p} (p1 only, asking for default)`);
    // p1 has no images of its own: it reads those of default.
    t.is((await tlsRequest(target, one, 'GET', `${p}?project=p1`)).status, 200, `${p} (p1)`);
  }
});

/** Status of each image route for each caller: the table compared with the reference's. */
async function imageStatuses(at: TlsTarget, fp: string, certs: { none: ClientCert; one: ClientCert }): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [method, p] of [['GET', `/1.0/images/${fp}`], ['GET', `/1.0/images/${fp}/export`], ['GET', '/1.0/images/aliases/bb'], ['GET', '/1.0/images'],
    ['GET', '/1.0/images/aliases'], ['POST', `/1.0/images/${fp}/secret`]] as const) {
    for (const [who, cert, query] of [['none', certs.none, ''], ['one', certs.one, 'project=default'], ['one', certs.one, 'project=p1'], ['untrusted', undefined, '']] as const) {
      const url = query ? `${p}${p.includes('?') ? '&' : '?'}${query}` : p;
      out[`${who} ${method} ${url.replace(fp, '<fp>')}`] = (await tlsRequest(at, cert, method, url)).status;
    }
  }
  return out;
}

interop('restricted certificates outside their projects on the image routes: 404 on the reads open to anyone, 403 on the others, as the reference answers', async (t) => {
  const fp = (await d.request('GET', '/1.0/images/aliases/bb')).json.metadata.target as string;
  const ours = await imageStatuses(target, fp, { none, one });
  const ref = await startReference();
  try {
    const port = await freePort();
    const imported = await ref.lxc('image', 'import', image(), '--alias', 'bb');
    t.is(imported.status, 0, imported.stderr);
    for (const args of [['config', 'set', 'core.https_address', `127.0.44.8:${port}`], ['project', 'create', 'p1', '-c', 'features.images=false'],
      ['config', 'trust', 'add', none.certFile, '--restricted', '--name', 'none'], ['config', 'trust', 'add', one.certFile, '--restricted', '--projects', 'p1', '--name', 'one']]) {
      const res = await ref.lxc(...args);
      t.is(res.status, 0, `${args.join(' ')}: ${res.stderr}`);
    }
    const theirs = await imageStatuses({ host: '127.0.44.8', port }, fp, { none, one });
    t.deepEqual(ours, theirs);
    t.is(theirs[`none GET /1.0/images/<fp>`], 404);
    t.is(theirs['none GET /1.0/images/aliases'], 403);
  } finally {
    await ref.stop();
  }
});
