/** An operation's waiters: each one is removed when it wakes, whether the end, its timeout or its caller's hang-up woke it. */
import test from 'ava';
import { EventHub } from '../../kernel/events/hub.js';
import { OperationManager } from '../../kernel/operations/manager.js';

const tokenOperation = () => {
  const ops = new OperationManager(new EventHub(() => 'none'), () => 'none');
  const op = ops.create({ class: 'token', description: 'A token', mayCancel: true });
  return { ops, op: ops.get(op.id)! };
};

test('waits whose callers hung up leave no waiter on a running operation', async (t) => {
  const { op } = tokenOperation();
  const callers = Array.from({ length: 50 }, () => new AbortController());
  const waits = callers.map((c) => op.wait(undefined, c.signal));
  t.is(op.waiting, 50);
  for (const c of callers) c.abort();
  await Promise.all(waits);
  t.is(op.waiting, 0);
  t.false(op.isFinal);
});

test('waits that timed out leave no waiter; the end wakes the others', async (t) => {
  const { ops, op } = tokenOperation();
  await Promise.all([op.wait(1), op.wait(5)]);
  t.is(op.waiting, 0);
  const forever = op.wait(undefined);
  const aborted = new AbortController();
  aborted.abort();
  await op.wait(undefined, aborted.signal);
  t.is(op.waiting, 1);
  await ops.cancel(op.id);
  await forever;
  t.is(op.waiting, 0);
  await op.wait(undefined);
});
