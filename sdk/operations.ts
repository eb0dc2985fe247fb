/** Background operations (part 2.1 and 3 of the spec). The kernel owns them; plugins create them. */
import type { WebSocket } from 'ws';
import type { Requestor } from './events.js';
import type { ApiRequest } from './routes.js';

export type OperationClass = 'task' | 'websocket' | 'token';

/** Status pairs of part 3 that operations move through. */
export const OperationStatus = {
  Pending: { text: 'Pending', code: 105 },
  Running: { text: 'Running', code: 103 },
  Cancelling: { text: 'Cancelling', code: 104 },
  Success: { text: 'Success', code: 200 },
  Failure: { text: 'Failure', code: 400 },
  Cancelled: { text: 'Cancelled', code: 401 },
} as const;
export type OperationStatusName = keyof typeof OperationStatus;

/** The wire form of an operation. */
export interface OperationView {
  id: string;
  class: OperationClass;
  description: string;
  created_at: string;
  updated_at: string;
  status: string;
  status_code: number;
  resources: Record<string, string[]> | null;
  metadata: Record<string, unknown> | null;
  may_cancel: boolean;
  err: string;
  location: string;
}

/** What an operation's body can do while it runs. */
export interface OperationControl {
  readonly id: string;
  /** Aborted when a client cancels the operation or the daemon shuts down. */
  readonly signal: AbortSignal;
  /** Merge keys into the operation metadata (progress, results) and emit an operation event. */
  updateMetadata(patch: Record<string, unknown>): void;
}

export interface OperationSpec {
  class: OperationClass;
  description: string;
  /**
   * The request this operation answers. The operation then belongs to the project that request
   * named (`requestedProjectOf`), wherever `features.*` put the resources it works on: the reference
   * files it there, and its clients wait for it on that project's event stream.
   */
  request?: ApiRequest;
  /** For work no request started (timers, schedules): the project it belongs to (default `default`). */
  project?: string;
  resources?: Record<string, string[]>;
  metadata?: Record<string, unknown>;
  /** Whether DELETE on the operation cancels it. */
  mayCancel?: boolean;
  requestor?: Requestor;
  /** The work. Resolve with extra metadata to merge, throw to fail. Token operations may omit it. */
  run?: (op: OperationControl) => Promise<Record<string, unknown> | void>;
  /** Websocket class: a client connected with one of the secrets from `secrets`. */
  connect?: (secretName: string, socket: WebSocket, op: OperationControl) => void;
  /** Websocket class: named secrets; they are published under metadata.fds. */
  secrets?: string[];
  /**
   * Websocket class: publish the secrets as top-level metadata keys instead of under `fds` (the
   * migration protocol's peers read `control` and `fs` there).
   */
  secretsAtTop?: boolean;
  /**
   * Websocket class: the secrets a client must open before `run` starts (default: all of them).
   * When they are not all open within the kernel's bound, the operation fails and `run` never runs.
   */
  requiredSecrets?: string[];
  /**
   * Websocket class: secrets a client may open any number of times, each opening a new socket (a
   * VGA console's data socket: a SPICE client opens one connection per channel).
   */
  reusableSecrets?: string[];
  /** Called when a client cancels (in addition to the abort signal). */
  onCancel?: () => Promise<void> | void;
}

export interface Operation {
  readonly id: string;
  readonly url: string;
  readonly project: string;
  view(): OperationView;
  /** Settles when the operation reaches a final status. */
  done(): Promise<OperationView>;
}

export interface OperationsService {
  /** Create and start an operation (the run body starts on the next tick). */
  create(spec: OperationSpec): Operation;
  get(id: string): Operation | undefined;
  /** Running operations of a class (a plugin finding its own tokens). */
  list(filter: { class: OperationClass }): Operation[];
  /** Cancel as a client's DELETE would (a consumed token ends this way). */
  cancel(id: string): Promise<void>;
}

/**
 * Create an operation holding a reservation (a backup name, say) that `release` gives back: when
 * the work ends, whatever its outcome, or at once when the operation cannot be created.
 */
export function createReleasing(operations: OperationsService, spec: OperationSpec, release?: () => void): Operation {
  const run = spec.run;
  try {
    return operations.create({
      ...spec,
      run: async (op) => {
        try {
          return await run?.(op);
        } finally {
          release?.();
        }
      },
    });
  } catch (err) {
    release?.();
    throw err;
  }
}
