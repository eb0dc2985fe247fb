/** PATCH of a trusted certificate changes only the fields it sends; `projects` survive `restricted: false`. */
import test from 'ava';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { selfSigned } from '../helpers/pki.js';

const carol = selfSigned(mkdtempSync(path.join(tmpdir(), 'corral-certs-')), 'carol');
const url = `/1.0/certificates/${carol.fingerprint}`;
let d: Daemon;

test.before(async () => {
  d = await startDaemon({ plugins: 'warnings,certificates' });
  const added = await d.request('POST', '/1.0/certificates', { type: 'client', name: 'carol', certificate: carol.base64, restricted: true, projects: ['default'] });
  if (added.status !== 200) throw new Error(added.body);
});
test.after.always(stopDaemons);

const shown = async () => {
  const { certificate: _, ...rest } = (await d.request('GET', url)).json.metadata;
  return rest;
};

test.serial('PATCH {restricted: false} keeps the projects, as the reference does', async (t) => {
  t.is((await d.request('PATCH', url, { restricted: false })).status, 200);
  t.like(await shown(), { name: 'carol', type: 'client', restricted: false, projects: ['default'] });
});

test.serial('PATCH of the name keeps restricted and projects', async (t) => {
  t.is((await d.request('PATCH', url, { restricted: true })).status, 200);
  t.is((await d.request('PATCH', url, { name: 'carol2' })).status, 200);
  t.like(await shown(), { name: 'carol2', restricted: true, projects: ['default'] });
});

test.serial('PATCH with wrong types or no object is 400 and changes nothing', async (t) => {
  for (const body of ['', 'null', '[]', '{"restricted":"no"}', '{"projects":"default"}']) {
    const res = await d.request('PATCH', url, body, { 'content-type': 'application/json' });
    t.is(res.status, 400, `${body}: ${res.body}`);
    t.is(res.json.type, 'error');
  }
  t.like(await shown(), { name: 'carol2', restricted: true, projects: ['default'] });
});
