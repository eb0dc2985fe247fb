/**
 * `limits.disk` (projects_limits_disk) counts the `size` of the custom volumes a project holds:
 * creations and copies past the limit are refused, a volume without a size is refused while the
 * limit is set, the project's state shows the volumes in its disk usage, and the limit cannot be
 * lowered below what the volumes take.
 */
import test from 'ava';
import { startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { callAndWait } from '../helpers/api.js';

let d: Daemon;
const GiB = 1024 ** 3;
const vols = '/1.0/storage-pools/default/volumes/custom';

test.before(async () => {
  d = await startDaemon({ plugins: 'full', args: ['--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
  const made = await d.request('POST', '/1.0/projects', { name: 'lim', config: { 'features.storage.volumes': 'true', 'features.images': 'true', 'features.profiles': 'true', 'limits.disk': '3GiB' } });
  if (made.status !== 200) throw new Error(made.body);
});

test.after.always(async () => {
  await stopDaemons();
});

test.serial('custom volume sizes count in limits.disk (projects_limits_disk)', async (t) => {
  const inLim = (url: string) => `${url}${url.includes('?') ? '&' : '?'}project=lim`;
  t.is((await d.request('POST', inLim(vols), { name: 'a', config: { size: '2GiB' } })).status, 200);
  const state = (await d.request('GET', '/1.0/projects/lim/state')).json.metadata.resources.disk;
  t.deepEqual(state, { Limit: 3 * GiB, Usage: 2 * GiB });

  const over = await d.request('POST', inLim(vols), { name: 'b', config: { size: '2GiB' } });
  t.is(over.status, 400, over.body);
  t.regex(over.json.error, /limits\.disk/);
  t.is((await d.request('GET', inLim(`${vols}/b`))).status, 404, 'nothing created');
  const unsized = await d.request('POST', inLim(vols), { name: 'c' });
  t.is(unsized.status, 400);
  t.regex(unsized.json.error, /must have a size/);

  // A copy is a new volume of the same size; growing one past the limit is refused too.
  const copy = await callAndWait(d, 'POST', inLim(vols), { name: 'a2', source: { type: 'copy', name: 'a' } });
  t.is(copy.op?.status ?? copy.json?.status_code, copy.op ? 'Failure' : 400, copy.body);
  t.is((await d.request('PATCH', inLim(`${vols}/a`), { config: { size: '4GiB' } })).status, 400);
  t.is((await d.request('POST', inLim(vols), { name: 'b', config: { size: '1GiB' } })).status, 200);
  t.is((await d.request('GET', '/1.0/projects/lim/state')).json.metadata.resources.disk.Usage, 3 * GiB);

  const lower = await d.request('PATCH', '/1.0/projects/lim', { config: { 'limits.disk': '2GiB' } });
  t.is(lower.status, 400);
  t.regex(lower.json.error, /already use/);
  // The default project (no limit) is unaffected by lim's volumes.
  t.is((await d.request('GET', '/1.0/projects/default/state')).json.metadata.resources.disk.Usage, 0);
});
