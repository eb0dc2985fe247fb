/** Keeps the operations of this daemon; finished ones stay visible for a while, then go. */
import type { EventHub } from '../events/hub.js';
import { ApiError, notFound, type Operation, type OperationClass, type OperationsService, type OperationSpec } from '../../sdk/index.js';
import { OperationRecord } from './operation.js';
import type { ChangeActivity } from '../change-activity.js';

/** How long a finished operation stays listed (the reference keeps them a few seconds). */
const KEEP_FINISHED_MS = 5_000;
/** At shutdown, how long an aborted operation gets to clean up after itself. */
export const OPERATION_ABORT_GRACE_MS = 5_000;

/** Wait until every operation has ended, or `ms` has passed. */
async function settled(ops: OperationRecord[], ms: number): Promise<void> {
  if (ops.every((op) => op.isFinal)) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(ops.map((op) => op.done())),
    new Promise((resolve) => (timer = setTimeout(resolve, ms))),
  ]);
  clearTimeout(timer);
}

export class OperationManager implements OperationsService {
  private readonly operations = new Map<string, OperationRecord>();
  private closed = false;
  /** Moves with every change of an operation and every one that goes (revision()). */
  private changes = 0;

  /** How each running operation with a body ends its part in the daemon's change activity. */
  private readonly activityEnds = new Map<string, () => void>();

  /** `activity`: operations that run a body are changes while they run (a token waits for a request, which counts itself). */
  constructor(private readonly events: EventHub, private readonly location: () => string, private readonly activity?: ChangeActivity) {}

  create(spec: OperationSpec): Operation {
    // An answer for the client, not an internal fault: nothing new starts once shutdown began.
    if (this.closed) throw new ApiError(500, 'The daemon is shutting down');
    if (spec.class === 'websocket' && !spec.connect) throw new Error('websocket operations need a connect handler');
    const op = new OperationRecord(spec, this.location(), (changed) => this.changed(changed));
    this.operations.set(op.id, op);
    if (spec.run && this.activity) this.activityEnds.set(op.id, this.activity.begin());
    this.changed(op); // announced as Pending, then Running
    op.start();
    return op;
  }

  get(id: string): OperationRecord | undefined {
    return this.operations.get(id);
  }

  list(filter?: string | { class: OperationClass }): OperationRecord[] {
    const ops = [...this.operations.values()];
    if (filter === undefined) return ops;
    if (typeof filter === 'string') return ops.filter((op) => op.project === filter);
    return ops.filter((op) => op.spec.class === filter.class && !op.isFinal);
  }

  async cancel(id: string): Promise<void> {
    const op = this.operations.get(id);
    if (!op) throw notFound('Operation not found');
    await op.cancel();
  }

  /**
   * Shutdown: what a client could cancel, tokens and websocket sessions (their clients are about to be
   * disconnected) are aborted at once; the rest get `graceMs` to finish, then are aborted too and get
   * a short while to clean up (end their processes). Never waits longer than that.
   */
  async shutdown(graceMs: number): Promise<void> {
    this.closed = true;
    const pending = [...this.operations.values()].filter((op) => !op.isFinal);
    for (const op of pending) if (op.spec.mayCancel || !op.spec.run || op.spec.class === 'websocket') op.abortForShutdown();
    await settled(pending, graceMs);
    const stuck = pending.filter((op) => !op.isFinal);
    for (const op of stuck) op.abortForShutdown();
    await settled(stuck, OPERATION_ABORT_GRACE_MS);
  }

  /** Equal while no operation changed, came or went: what a listing of them shows is the same. */
  revision(): number {
    return this.changes;
  }

  private changed(op: OperationRecord): void {
    this.changes++;
    // Before anyone hears of the end: a read after it must not take an answer kept while it ran.
    if (op.isFinal) this.endActivity(op.id);
    // Progress updates come often: with nobody following operation events they cost no view.
    if (this.events.watched('operation')) this.events.emit('operation', op.view(), op.project);
    if (op.isFinal) {
      setTimeout(() => {
        this.operations.delete(op.id);
        this.changes++;
      }, KEEP_FINISHED_MS).unref();
    }
  }

  private endActivity(id: string): void {
    const end = this.activityEnds.get(id);
    if (!end) return;
    this.activityEnds.delete(id);
    end();
  }
}
