/**
 * GET /openapi.json through real clients: curl over the unix socket, and over HTTPS (turned on with
 * `lxc config set core.https_address`) with no certificate, an untrusted one and a trusted one: every
 * caller that may read GET /1.0 gets the same document, the one `npm run docs` wrote for the full
 * build, and it passes a real validator. The reference (LXD 5.0.2) serves no API description: it
 * answers this path with a 404 error envelope (docs/decisions/0036-api-description.md).
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Validator } from '@seriousme/openapi-schema-validator';
import { projectRoot, startDaemon, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { selfSigned, type ClientCert } from '../helpers/pki.js';
import { referenceUnavailable, startReference } from '../helpers/reference-daemon.js';
import { freePort } from '../helpers/tls-client.js';

/** A loopback address of this test's own. */
const HOST = '127.0.36.1';

let d: Daemon;
let httpsUrl = '';
const scratch = mkdtempSync(path.join(tmpdir(), 'corral-openapi-'));
let trusted: ClientCert;
let stranger: ClientCert;

interface CurlAnswer {
  status: number;
  body: string;
}

/** curl's answer: the body, then the status on a line of its own. */
async function curl(...args: string[]): Promise<CurlAnswer> {
  const { stdout } = await promisify(execFile)('curl', ['-sS', '--max-time', '60', '-w', '\n%{http_code}', ...args], { maxBuffer: 16 * 1024 * 1024 });
  const cut = stdout.lastIndexOf('\n');
  return { body: stdout.slice(0, cut), status: Number(stdout.slice(cut + 1)) };
}

const overSocket = (socket: string, url: string, ...args: string[]) => curl('--unix-socket', socket, ...args, `http://corral${url}`);
const overHttps = (client: ClientCert | undefined, url: string) => curl('-k', ...(client ? ['--cert', client.certFile, '--key', client.keyFile] : []), `${httpsUrl}${url}`);

async function validate(text: string): Promise<{ valid: boolean; errors: unknown }> {
  const result = await new Validator().validate(JSON.parse(text));
  return { valid: result.valid, errors: result.errors };
}

test.before(async () => {
  d = await startDaemon({ plugins: 'full' });
  trusted = selfSigned(scratch, 'trusted');
  stranger = selfSigned(scratch, 'stranger');
  const added = await lxc(d.socket, 'config', 'trust', 'add', trusted.certFile, '--name', 'trusted');
  if (added.status !== 0) throw new Error(`lxc config trust add: ${added.stderr}`);
});

test.after.always(async () => {
  await stopDaemons();
  rmSync(scratch, { recursive: true, force: true });
});

test.serial('curl over the unix socket gets the valid OpenAPI document of the full build', async (t) => {
  const answer = await overSocket(d.socket, '/openapi.json');
  t.is(answer.status, 200);
  const { valid, errors } = await validate(answer.body);
  t.true(valid, JSON.stringify(errors));
  t.deepEqual(JSON.parse(answer.body), JSON.parse(readFileSync(path.join(projectRoot, 'docs', 'openapi.json'), 'utf8')),
    'what the daemon serves is what `npm run docs` wrote for the full build');
  const headers = await overSocket(d.socket, '/openapi.json', '-D', '-', '-o', '/dev/null');
  t.regex(headers.body, /content-type: application\/json/i);
  // Another method on the path is refused with the error envelope, as on any route.
  const post = await overSocket(d.socket, '/openapi.json', '-X', 'POST', '-d', '{}');
  t.is(post.status, 400);
  t.is(JSON.parse(post.body).type, 'error');
});

test.serial('over HTTPS, whoever may read GET /1.0 reads the document: no certificate, an untrusted or a trusted one', async (t) => {
  httpsUrl = `https://${HOST}:${await freePort()}`;
  await lxcOk(t, d.socket, 'config', 'set', 'core.https_address', httpsUrl.slice('https://'.length));
  const local = (await overSocket(d.socket, '/openapi.json')).body;
  for (const [who, client] of [['no certificate', undefined], ['an untrusted certificate', stranger], ['a trusted certificate', trusted]] as const) {
    const info = await overHttps(client, '/1.0');
    t.is(info.status, 200, `GET /1.0 with ${who}`);
    const doc = await overHttps(client, '/openapi.json');
    t.is(doc.status, 200, `GET /openapi.json with ${who}: ${doc.body.slice(0, 200)}`);
    t.is(doc.body, local, `the same document with ${who}`);
  }
  // The document is open, the API it describes is not: an untrusted caller is still refused there.
  t.is((await overHttps(stranger, '/1.0/instances')).status, 403);
  t.is((await overHttps(trusted, '/1.0/instances')).status, 200);
});

test('the reference serves no API description: a 404 error envelope', async (t) => {
  // A private reference: the host's /var/lib/lxd/unix.socket may exist with nothing listening on it.
  const unavailable = referenceUnavailable();
  if (unavailable) {
    t.log(`skipped: ${unavailable}`);
    t.pass();
    return;
  }
  t.timeout(180_000);
  const ref = await startReference();
  try {
    const answer = await overSocket(ref.socket, '/openapi.json');
    t.is(answer.status, 404);
    t.like(JSON.parse(answer.body), { type: 'error', error_code: 404 });
    t.is((await overSocket(ref.socket, '/1.0')).status, 200);
  } finally {
    await ref.stop();
  }
});
