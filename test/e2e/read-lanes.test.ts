/**
 * The fast lane for plain reads (decision 0079) on a real daemon with real records made by `lxc`:
 * every read the read-path bench drives, and the items under them, answer the same status, headers and
 * bytes whether the fast lane or hapi serves them (a request with an `If-None-Match` no answer matches
 * is one the fast lane leaves to hapi). The listings `lxc` itself makes go through the fast lane.
 */
import test from 'ava';
import { startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { hasLxc, lxcOk } from '../helpers/clients.js';
import { requestAsSent } from '../helpers/raw-http.js';

const serial = hasLxc() ? test.serial : test.serial.skip;
test.after.always(stopDaemons);

let d: Daemon;
test.before(async (t) => {
  if (!hasLxc()) return;
  d = await startWithPool({ plugins: 'full' });
  await importImage(d, buildBusyboxImage('gzip').unified, 'bb');
  await lxcOk(t, d.socket, 'profile', 'create', 'lanes');
  await lxcOk(t, d.socket, 'profile', 'set', 'lanes', 'user.lane', 'fast');
  for (const name of ['r1', 'r2']) await lxcOk(t, d.socket, 'init', 'bb', name, '--profile', 'default', '--profile', 'lanes');
  await lxcOk(t, d.socket, 'storage', 'volume', 'create', 'default', 'vol1');
  await lxcOk(t, d.socket, 'snapshot', 'r1', 'snap0');
});

/** Bodies compared as text: a difference then reads in the assertion. */
const get = async (url: string, headers: Record<string, string> = {}) => {
  const sent = await requestAsSent(d.socket, url, headers);
  return { ...sent, body: sent.body.toString('latin1') };
};

serial('the reads the bench drives answer alike through the fast lane and through hapi', async (t) => {
  const bases = ['/1.0', '/1.0/instances', '/1.0/profiles', '/1.0/networks', '/1.0/images', '/1.0/operations', '/1.0/storage-pools/default/volumes'];
  const urls = [
    ...bases.flatMap((b) => [b, `${b}?recursion=1`]),
    '/1.0/instances?recursion=2', '/1.0/instances?recursion=1&filter=name%20eq%20r2', '/1.0/instances/r1', '/1.0/instances/r1/snapshots?recursion=1',
    '/1.0/instances/r1/snapshots/snap0', '/1.0/profiles/lanes', '/1.0/images/aliases/bb', '/1.0/storage-pools/default/volumes/custom/vol1',
    '/1.0/instances?project=nothere', '/1.0/instances/none', '/1.0/instances?all-projects=true&recursion=1', '/1.0/certificates', '/1.0/projects?recursion=1',
  ];
  for (const url of urls) {
    const fast = await get(url);
    const slow = await get(url, { 'If-None-Match': '"no-answer-has-this-tag"' });
    t.deepEqual(fast, slow, url);
  }
});

serial('lxc reads what it made (its GETs are plain reads, which the fast lane answers)', async (t) => {
  t.deepEqual((await lxcOk(t, d.socket, 'list', '--format', 'csv', '-c', 'ns')).trim().split('\n').sort(), ['r1,STOPPED', 'r2,STOPPED']);
  t.regex(await lxcOk(t, d.socket, 'profile', 'show', 'lanes'), /user\.lane: fast/);
  t.regex(await lxcOk(t, d.socket, 'storage', 'volume', 'list', 'default', '--format', 'csv'), /custom,vol1,/);
  t.regex(await lxcOk(t, d.socket, 'info', 'r1'), /snap0/);
});
