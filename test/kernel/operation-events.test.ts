/**
 * Operation events cost nothing when nobody follows them: progress updates (several a second during
 * an image unpack) then build neither a view nor an event; a listener of another type changes nothing.
 */
import test from 'ava';
import { EventHub } from '../../kernel/events/hub.js';
import { OperationManager } from '../../kernel/operations/manager.js';
import { OperationRecord } from '../../kernel/operations/operation.js';

async function runWithUpdates(hub: EventHub, updates: number): Promise<void> {
  const ops = new OperationManager(hub, () => 'none');
  const op = ops.create({
    class: 'task', description: 'Progressing',
    run: async (c) => {
      for (let i = 0; i < updates; i++) c.updateMetadata({ step: i });
    },
  });
  await op.done();
}

test.serial('with no listener of operation events, metadata updates build no view and no event', async (t) => {
  const realView = OperationRecord.prototype.view;
  let views = 0;
  OperationRecord.prototype.view = function view(this: OperationRecord) {
    views++;
    return realView.call(this);
  };
  t.teardown(() => (OperationRecord.prototype.view = realView));
  const hub = new EventHub(() => 'none');
  const lifecycle: unknown[] = [];
  hub.subscribe((e) => lifecycle.push(e), ['lifecycle']);
  t.false(hub.watched('operation'));
  await runWithUpdates(hub, 100);
  t.true(views <= 2, `${views} views built for 100 updates`);
  t.is(lifecycle.length, 0);

  // Somebody follows operations: every update is an event again.
  const seen: any[] = [];
  const stop = hub.subscribe((e) => seen.push(e), ['operation']);
  t.true(hub.watched('operation'));
  await runWithUpdates(hub, 100);
  t.true(seen.filter((e) => e.metadata.status === 'Running').length >= 100);
  stop();
  stop();
  t.false(hub.watched('operation'), 'unsubscribing twice counts once');
});
