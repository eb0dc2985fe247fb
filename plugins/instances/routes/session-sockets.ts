/**
 * The websockets of an exec or console operation: wait until the client opened the data sockets,
 * then relay. The control socket is optional (pylxd never opens it), as with the reference.
 */
import type { WebSocket } from 'ws';
import type { ApiRequest, Operation, OperationControl, PluginContext } from '../../../sdk/index.js';
import { operationResources } from './paths.js';

type ControlMessage = { command?: string; args?: Record<string, string>; signal?: number };

export class SessionSockets {
  private readonly sockets = new Map<string, WebSocket>();
  private readonly waiting: (() => void)[] = [];
  private controlHandler?: (msg: ControlMessage) => void;

  constructor(private readonly names: string[]) {}

  /** The operation's `connect`: a client opened one of the secrets. */
  attach(name: string, socket: WebSocket): void {
    const previous = this.sockets.get(name);
    if (previous) previous.terminate();
    this.sockets.set(name, socket);
    if (name === 'control') this.listenControl(socket);
    if (this.complete()) for (const wake of this.waiting.splice(0)) wake();
  }

  get(name: string): WebSocket | undefined {
    return this.sockets.get(name);
  }

  private complete(): boolean {
    return this.names.every((n) => n === 'control' || this.sockets.has(n));
  }

  private listenControl(socket: WebSocket): void {
    socket.on('message', (data) => {
      let msg: ControlMessage;
      try {
        msg = JSON.parse(String(data));
      } catch {
        return; // not JSON: ignore, as a stray keepalive would be
      }
      this.controlHandler?.(msg);
    });
  }

  /** Resolves once every socket is open; rejects when the operation is cancelled first. */
  ready(signal: AbortSignal): Promise<void> {
    if (this.complete()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiting.push(resolve);
      signal.addEventListener('abort', () => reject(new Error('Operation cancelled before the client connected')), { once: true });
    });
  }

  /** Control messages (`window-resize`, `signal`) as parsed JSON, whenever the control socket connects. */
  onControl(handler: (msg: ControlMessage) => void): void {
    this.controlHandler = handler;
  }

  closeAll(): void {
    for (const socket of this.sockets.values()) {
      if (socket.readyState === socket.OPEN) socket.close(1000);
    }
  }
}

/** Pipe a readable into a websocket as binary messages; resolves when the readable ends. */
export function pump(from: NodeJS.ReadableStream, to: WebSocket | undefined): Promise<void> {
  return new Promise((resolve) => {
    from.on('data', (chunk: Buffer) => {
      if (to && to.readyState === to.OPEN) to.send(chunk, { binary: true });
    });
    from.once('end', () => resolve());
    from.once('close', () => resolve());
    from.once('error', () => resolve());
  });
}

/**
 * A websocket operation about an instance: the client gets a secret per name in `secrets`, and
 * `body` runs once the data sockets are open.
 */
export function sessionOperation(
  ctx: PluginContext, req: ApiRequest, name: string, description: string, secrets: string[],
  body: (sockets: SessionSockets, op: OperationControl) => Promise<Record<string, unknown> | void>,
): Operation {
  const sockets = new SessionSockets(secrets);
  return ctx.operations.create({
    class: 'websocket',
    description,
    project: req.project,
    requestor: req.requestor,
    resources: operationResources(name),
    secrets,
    connect: (secret, socket) => sockets.attach(secret, socket),
    run: async (op) => {
      await sockets.ready(op.signal);
      return body(sockets, op);
    },
  });
}
