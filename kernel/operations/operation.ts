/** One background operation: its state machine (part 3) and its wire view. */
import { randomUUID } from 'node:crypto';
import type { WebSocket } from 'ws';
import {
  ApiError, OperationStatus, requestedProjectOf, HeldSecrets, randomHex,
  type Operation, type OperationControl, type OperationSpec, type OperationStatusName, type OperationView,
} from '../../sdk/index.js';
import { clientMessage } from '../http/client-message.js';

const FINAL: ReadonlySet<OperationStatusName> = new Set(['Success', 'Failure', 'Cancelled']);

/** How long a client has to open the required websockets (the reference gives 5 s, then fails the operation). */
export const WEBSOCKET_CONNECT_TIMEOUT_MS = 5_000;
/** A socket still open this long after its operation ended is cut (a client that never answers the close). */
const SOCKET_CLOSE_GRACE_MS = 2_000;

export class OperationRecord implements Operation {
  readonly id = randomUUID();
  readonly url = `/1.0/operations/${this.id}`;
  readonly project: string;
  readonly createdAt = new Date().toISOString();
  private updatedAt = this.createdAt;
  private status: OperationStatusName = 'Pending';
  private metadata: Record<string, unknown> | null;
  private err = '';
  private readonly abort = new AbortController();
  private readonly finished: Promise<OperationView>;
  private finalView?: OperationView;
  private resolveFinished!: (view: OperationView) => void;
  /** Wakers of `/wait` callers; each removes itself when it fires, whatever fired it. */
  private readonly waiters = new Set<() => void>();
  /** secret -> name of the socket it opens (websocket class). */
  private readonly secrets = new HeldSecrets<string>();
  /** Names whose socket a client has opened, and every socket still attached to this operation. */
  private readonly opened = new Set<string>();
  private readonly sockets = new Set<WebSocket>();
  private allOpened?: () => void;
  readonly control: OperationControl;

  readonly spec: OperationSpec;

  constructor(spec: OperationSpec, private readonly location: string, private readonly changed: (op: OperationRecord) => void) {
    // The request only says which project the operation belongs to: not kept for the operation's life.
    const { request, ...rest } = spec;
    this.spec = rest;
    this.project = request ? requestedProjectOf(request) : spec.project ?? 'default';
    this.metadata = spec.metadata ? { ...spec.metadata } : null;
    if (spec.class === 'websocket') {
      const fds: Record<string, string> = {};
      for (const name of spec.secrets ?? []) {
        const secret = randomHex(32);
        this.secrets.add(secret, name);
        fds[name] = secret;
      }
      this.metadata = spec.secretsAtTop ? { ...(this.metadata ?? {}), ...fds } : { ...(this.metadata ?? {}), fds };
    }
    this.finished = new Promise((resolve) => (this.resolveFinished = resolve));
    this.control = {
      id: this.id,
      signal: this.abort.signal,
      updateMetadata: (patch) => {
        this.metadata = { ...(this.metadata ?? {}), ...patch };
        this.touch();
      },
    };
  }

  get isFinal(): boolean {
    return FINAL.has(this.status);
  }

  view(): OperationView {
    if (this.finalView) return this.finalView;
    const status = OperationStatus[this.status];
    const view: OperationView = {
      id: this.id,
      class: this.spec.class,
      description: this.spec.description,
      created_at: this.createdAt,
      updated_at: this.updatedAt,
      status: status.text,
      status_code: status.code,
      resources: this.spec.resources ?? null,
      metadata: this.metadata,
      may_cancel: Boolean(this.spec.mayCancel) && !this.isFinal,
      err: this.err,
      location: this.location,
    };
    // A finished operation stays listed for a while and no longer changes: one frozen view, which a
    // listing then serialises once (the pipeline keeps the bytes of frozen views).
    if (this.isFinal) this.finalView = Object.freeze(view);
    return view;
  }

  done(): Promise<OperationView> {
    return this.finished;
  }

  /**
   * Resolves when the operation ends, after `timeoutMs` (undefined: no limit) or when `signal` aborts
   * (its caller went away). Unlike a race against done(), nothing stays attached to a long-lived
   * operation (a token, say) once the wait is over.
   */
  wait(timeoutMs: number | undefined, signal?: AbortSignal): Promise<void> {
    if (this.isFinal || signal?.aborted || timeoutMs === 0) return Promise.resolve();
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const wake = () => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        signal?.removeEventListener('abort', wake);
        resolve();
      };
      this.waiters.add(wake);
      if (timeoutMs !== undefined) timer = setTimeout(wake, timeoutMs);
      signal?.addEventListener('abort', wake, { once: true });
    });
  }

  /** How many `/wait` callers are waiting (for tests of the above). */
  get waiting(): number {
    return this.waiters.size;
  }

  /** Move to Running and run the body; token operations just stay Running until cancelled. */
  start(): void {
    this.setStatus('Running');
    const run = this.spec.run;
    if (!run) return;
    setImmediate(() => {
      this.socketsOpened().then(() => run(this.control)).then(
        (result) => {
          if (result) this.metadata = { ...(this.metadata ?? {}), ...result };
          this.finish(this.abort.signal.aborted ? 'Cancelled' : 'Success');
        },
        (error: unknown) => {
          if (this.abort.signal.aborted) this.finish('Cancelled', 'Operation cancelled');
          else this.finish('Failure', error instanceof Error ? error.message : String(error));
        },
      );
    });
  }

  /**
   * Websocket class: resolves once the client opened every required socket; rejects when that takes
   * longer than the bound (then the signal aborts, so whatever `connect` set up is released) or when
   * the operation is cancelled first.
   */
  private socketsOpened(): Promise<void> {
    if (this.spec.class !== 'websocket' || this.requiredOpen()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.allOpened = undefined;
        const message = 'Timed out waiting for websockets to connect';
        // Failed first, so the abort that lets plugins clean up does not read as a cancel.
        this.finish('Failure', message);
        this.abort.abort();
        reject(new Error(message));
      }, WEBSOCKET_CONNECT_TIMEOUT_MS);
      timer.unref();
      this.allOpened = () => {
        clearTimeout(timer);
        resolve();
      };
      this.abort.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(new Error('Operation cancelled'));
      }, { once: true });
    });
  }

  private requiredOpen(): boolean {
    return (this.spec.requiredSecrets ?? this.spec.secrets ?? []).every((name) => this.opened.has(name));
  }

  async cancel(): Promise<void> {
    if (this.isFinal) throw new ApiError(400, 'The operation has already finished');
    if (!this.spec.mayCancel) throw new ApiError(400, "This operation can't be cancelled");
    this.setStatus('Cancelling');
    this.abort.abort();
    await this.spec.onCancel?.();
    if (!this.spec.run) this.finish('Cancelled', 'Operation cancelled');
  }

  /** Abort on daemon shutdown whatever the class. */
  abortForShutdown(): void {
    if (this.isFinal || this.abort.signal.aborted) return;
    this.abort.abort();
    if (!this.spec.run) this.finish('Cancelled', 'Daemon shutting down');
  }

  hasSecret(secret: string): boolean {
    return this.nameOf(secret) !== undefined;
  }

  /** The socket name of a secret, compared in constant time so timing tells a guesser nothing. */
  private nameOf(secret: string): string | undefined {
    return this.secrets.find(secret);
  }

  /** Whether a client already opened the socket of this secret (each opens once, as with the reference). */
  isOpened(secret: string): boolean {
    const name = this.nameOf(secret);
    return name !== undefined && this.opened.has(name) && !this.spec.reusableSecrets?.includes(name);
  }

  /**
   * Websocket class: route a connecting client to the plugin; false when the secret is wrong, already
   * used, or the operation is over. The socket stays the operation's: it is closed when the operation ends.
   */
  connect(secret: string, socket: WebSocket): boolean {
    const name = this.nameOf(secret);
    if (name === undefined || !this.spec.connect || this.isFinal) return false;
    if (this.opened.has(name) && !this.spec.reusableSecrets?.includes(name)) return false;
    this.opened.add(name);
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    this.spec.connect(name, socket, this.control);
    if (this.allOpened && this.requiredOpen()) this.allOpened();
    return true;
  }

  /** Close what is still attached; a peer that does not finish the closing handshake is cut. */
  private releaseSockets(): void {
    for (const socket of this.sockets) {
      if (socket.readyState === socket.OPEN) socket.close(1000);
      setTimeout(() => socket.terminate(), SOCKET_CLOSE_GRACE_MS).unref();
    }
  }

  private finish(status: OperationStatusName, err = ''): void {
    if (this.isFinal) return;
    // Failures quote whatever a step threw (a tool, a library): filtered like every error a client reads.
    this.err = clientMessage(err);
    this.setStatus(status);
    this.resolveFinished(this.view());
    this.releaseSockets();
    for (const wake of [...this.waiters]) wake();
  }

  private setStatus(status: OperationStatusName): void {
    this.status = status;
    this.touch();
  }

  private touch(): void {
    this.finalView = undefined;
    this.updatedAt = new Date().toISOString();
    this.changed(this);
  }
}
