/**
 * GET /1.0/operations?recursion=1 groups operations by status. Finished operations stay listed for a
 * while without changing, and their views are serialised once (kept fragments): the answer must still be
 * exactly what serialising the whole listing would give, follow each change of status, and name no
 * operation twice.
 */
import test from 'ava';
import { startDaemon, stopDaemons, type Daemon } from '../helpers/daemon.js';

let daemon: Daemon;

test.before(async () => {
  daemon = await startDaemon({ plugins: 'edge' });
});

test.after.always(stopDaemons);

const token = async (name: string) => (await daemon.request('POST', '/1.0/certificates', { type: 'client', name, token: true })).json.metadata.id as string;

async function listing(): Promise<{ body: string; groups: Record<string, { id: string; status: string; may_cancel: boolean }[]> }> {
  const res = await daemon.request('GET', '/1.0/operations?recursion=1');
  if (res.status !== 200) throw new Error(`listing answered ${res.status}`);
  return { body: res.body, groups: res.json.metadata };
}

test('finished operations are listed as a whole serialisation would write them, and follow each change', async (t) => {
  const ids = [await token('a'), await token('b'), await token('c')];
  for (const id of ids.slice(0, 2)) t.is((await daemon.request('DELETE', `/1.0/operations/${id}`)).status, 200);

  const first = await listing();
  // Byte for byte the JSON of the parsed answer: valid, in order, nothing doubled or left out.
  t.is(first.body, JSON.stringify(JSON.parse(first.body)));
  t.deepEqual(first.groups.running?.map((o) => o.id), [ids[2]]);
  t.deepEqual(first.groups.cancelled?.map((o) => o.id).sort(), ids.slice(0, 2).sort());
  t.true(first.groups.cancelled!.every((o) => o.status === 'Cancelled' && o.may_cancel === false));

  // Asked again, unchanged: the same bytes.
  t.is((await listing()).body, first.body);

  // The running one ends: it moves groups, and the others' kept bytes stay right beside it.
  t.is((await daemon.request('DELETE', `/1.0/operations/${ids[2]}`)).status, 200);
  const second = await listing();
  t.is(second.body, JSON.stringify(JSON.parse(second.body)));
  t.false("running" in second.groups);
  t.deepEqual(second.groups.cancelled?.map((o) => o.id).sort(), [...ids].sort());
  const one = (await daemon.request('GET', `/1.0/operations/${ids[2]}`)).json.metadata;
  t.deepEqual(second.groups.cancelled!.find((o) => o.id === ids[2]), one);
});
