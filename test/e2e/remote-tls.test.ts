/**
 * Remote access with the real clients: `lxc` turns on the HTTPS listener and the trust password
 * through the socket, then separate client homes (no socket) add the server as a remote with the
 * password and with a token from `lxc config trust add`, list, exec and launch there; `lxc config
 * trust list/remove`; pylxd over TLS with a client certificate; curl with an untrusted certificate.
 */
import test from 'ava';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot, type Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxcOk, python, type ClientRun, collectRun } from '../helpers/clients.js';
import { selfSigned } from '../helpers/pki.js';
import { freePort } from '../helpers/tls-client.js';

const PASSWORD = 'remote-pass-5d1c';
let d: Daemon;
let url = '';
const homes: string[] = [];

/** `lxc` as a remote user: its own config dir, and no LXD_SOCKET. */
function remoteLxc(home: string, ...args: string[]): Promise<ClientRun> {
  const { LXD_SOCKET: _s, LXD_DIR: _d, ...env } = process.env;
  const child = spawn('lxc', args, { env: { ...env, LXD_CONF: home, HOME: home } });
  child.stdin.end();
  return collectRun(child, 90_000);
}

const newHome = () => {
  const home = mkdtempSync(path.join(tmpdir(), 'corral-remote-home-'));
  homes.push(home);
  return home;
};

async function ok(t: any, home: string, ...args: string[]): Promise<string> {
  const res = await remoteLxc(home, ...args);
  t.is(res.status, 0, `lxc ${args.join(' ')}: ${res.stderr}`);
  return res.stdout;
}

test.before(async () => {
  d = await startWithImage({ plugins: 'full' });
});

test.after.always(async () => {
  await stopImageDaemons();
  for (const home of homes) rmSync(home, { recursive: true, force: true });
});

test.serial('lxc config set core.https_address and core.trust_password through the socket', async (t) => {
  const port = await freePort();
  url = `https://127.0.0.1:${port}`;
  await lxcOk(t, d.socket, 'config', 'set', 'core.https_address', `127.0.0.1:${port}`);
  await lxcOk(t, d.socket, 'config', 'set', 'core.trust_password', PASSWORD);
  t.is((await lxcOk(t, d.socket, 'config', 'get', 'core.trust_password')).trim(), 'true', 'the password is never shown');
  t.false(readFileSync(path.join(d.dir, 'corral.log'), 'utf8').includes(PASSWORD));
});

test.serial('a second client home adds the remote with the password, lists, launches and execs there', async (t) => {
  const home = newHome();
  const wrong = await remoteLxc(home, 'remote', 'add', 'r', url, '--password', 'not-it', '--accept-certificate');
  t.not(wrong.status, 0, 'a wrong password is refused');
  await ok(t, home, 'remote', 'add', 'r', url, '--password', PASSWORD, '--accept-certificate');
  t.is((await ok(t, home, 'list', 'r:', '--format', 'csv')).trim(), '');
  await ok(t, home, 'launch', 'r:bb', 'r:c');
  t.is((await ok(t, home, 'list', 'r:', '--format', 'csv', '-c', 'ns')).trim(), 'c,RUNNING');
  await ok(t, home, 'exec', 'r:c', '--', 'true');
  const failed = await remoteLxc(home, 'exec', 'r:c', '--', 'sh', '-c', 'exit 7');
  t.is(failed.status, 7);
  t.is((await ok(t, home, 'exec', 'r:c', '--', 'cat', '/etc/hostname')).trim(), 'c');
  // The certificate added for this home carries its name from the client certificate.
  const list = await lxcOk(t, d.socket, 'config', 'trust', 'list', '--format', 'csv');
  t.is(list.trim().split('\n').length, 1, list);
});

test.serial('a token from lxc config trust add lets a third home in once; lxc config trust remove shuts it out', async (t) => {
  const out = await lxcOk(t, d.socket, 'config', 'trust', 'add', '--name', 'laptop');
  const token = out.trim().split('\n').pop()!;
  const decoded = JSON.parse(Buffer.from(token, 'base64').toString('utf8'));
  t.is(decoded.client_name, 'laptop');
  t.deepEqual(decoded.addresses, [url.replace('https://', '')]);
  t.regex(await lxcOk(t, d.socket, 'config', 'trust', 'list-tokens', '--format', 'csv'), /^laptop,/m);

  const home = newHome();
  await ok(t, home, 'remote', 'add', 'r2', token);
  t.regex(await ok(t, home, 'list', 'r2:', '--format', 'csv', '-c', 'n'), /^c$/m);
  t.is((await lxcOk(t, d.socket, 'config', 'trust', 'list-tokens', '--format', 'csv')).trim(), '', 'the token is used up');
  const reuse = await remoteLxc(newHome(), 'remote', 'add', 'r3', token);
  t.not(reuse.status, 0, 'a token works once');

  const csv = await lxcOk(t, d.socket, 'config', 'trust', 'list', '--format', 'csv');
  const laptop = csv.split('\n').find((line) => line.startsWith('client,laptop,'));
  t.truthy(laptop, csv);
  const fingerprint = laptop!.split(',')[3]!;
  await lxcOk(t, d.socket, 'config', 'trust', 'remove', fingerprint);
  const shut = await remoteLxc(home, 'list', 'r2:');
  t.not(shut.status, 0, 'removed from the trust store: refused');
  t.regex(shut.stderr, /not authorized|Not authorized|forbidden|403/i);
});

test.serial('pylxd over TLS with a trusted client certificate, verifying the server certificate', async (t) => {
  const dir = newHome();
  const cert = selfSigned(dir, 'pylxd');
  await lxcOk(t, d.socket, 'config', 'trust', 'add', cert.certFile, '--name', 'pylxd');
  const run = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_tls.py'), [url, cert.certFile, cert.keyFile, 'c', path.join(d.dir, 'server.crt')]);
  t.is(run.status, 0, run.stderr);
  const seen = JSON.parse(run.stdout);
  t.true(seen.trusted);
  t.is(seen.auth, 'trusted');
  t.deepEqual(seen.containers, ['c']);
  t.is(seen.status, 'Running');
  t.is(seen.exit_code, 3);
  t.is(seen.stdout.trim(), 'over-tls');
  t.is(seen.file, 'pushed over tls');
});

test.serial('curl with an untrusted certificate gets GET / and the untrusted GET /1.0, and 403 elsewhere', async (t) => {
  const dir = newHome();
  const stranger = selfSigned(dir, 'stranger');
  const curl = (...args: string[]) => JSON.parse(execFileSync('curl', ['-sk', '--cert', stranger.certFile, '--key', stranger.keyFile, ...args], { encoding: 'utf8' }));
  t.deepEqual(curl(`${url}/`).metadata, ['/1.0']);
  const info = curl(`${url}/1.0`).metadata;
  t.is(info.auth, 'untrusted');
  t.is(info.config, undefined);
  for (const p of ['/1.0/instances', '/1.0/instances/c', '/1.0/images', '/1.0/certificates', '/1.0/operations', '/1.0/storage-pools']) {
    t.is(curl(`${url}${p}`).error_code, 403, p);
  }
  t.is(curl('-X', 'POST', '-d', '{"type":"client","password":"guess"}', `${url}/1.0/certificates`).error_code, 403);
  t.is(curl('-X', 'POST', '-d', `{"type":"client","password":"${PASSWORD}"}`, `${url}/1.0/certificates`).error_code, 0, 'with the password it adds itself');
  t.is(curl(`${url}/1.0/instances`).error_code, 0);
  await lxcOk(t, d.socket, 'delete', '-f', 'c');
});
