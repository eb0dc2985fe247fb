/**
 * The websockets of an exec or console operation. The kernel hands each over as the client opens
 * it and starts the session once the data sockets are all open (or fails the operation when they
 * are not, in time); it closes what is left when the operation ends. The control socket is optional
 * (pylxd never opens it), as with the reference.
 */
import type { WebSocket } from 'ws';
import type { ApiRequest, Operation, OperationControl, PluginContext } from '../../../sdk/index.js';
import { operationResources } from './paths.js';
import { SocketInput } from './socket-input.js';

export type ControlMessage = { command?: string; args?: Record<string, string>; signal?: number };

/** Control messages kept until the session listens (a resize sent at once, say). */
const MAX_QUEUED_CONTROL = 64;

export class SessionSockets {
  private readonly sockets = new Map<string, WebSocket>();
  private readonly inputs = new Map<string, SocketInput>();
  private readonly pendingControl: ControlMessage[] = [];
  private controlHandler?: (msg: ControlMessage) => void;
  private closeHandlers: { name: string; handler: () => void }[] = [];

  /** The operation's `connect`: a client opened one of the secrets (the kernel lets each open once). */
  attach(name: string, socket: WebSocket): void {
    this.sockets.set(name, socket);
    if (name === 'control') this.listenControl(socket);
    else this.inputs.set(name, new SocketInput(socket));
    for (const waiting of this.closeHandlers.filter((w) => w.name === name)) socket.once('close', waiting.handler);
    this.closeHandlers = this.closeHandlers.filter((w) => w.name !== name);
  }

  get(name: string): WebSocket | undefined {
    return this.sockets.get(name);
  }

  /** What the client sends on a data socket, from the moment it opened. */
  input(name: string): SocketInput | undefined {
    return this.inputs.get(name);
  }

  /**
   * `handler` runs once when the socket of `name` closes, should it open later (the control socket
   * may open after the session started); never when it is not opened.
   */
  onClose(name: string, handler: () => void): void {
    const socket = this.sockets.get(name);
    if (!socket) {
      this.closeHandlers.push({ name, handler });
      return;
    }
    if (socket.readyState === socket.CLOSED) handler();
    else socket.once('close', handler);
  }

  private listenControl(socket: WebSocket): void {
    socket.on('message', (data) => {
      let msg: ControlMessage;
      try {
        msg = JSON.parse(String(data));
      } catch {
        return; // not JSON: ignore, as a stray keepalive would be
      }
      if (!msg || typeof msg !== 'object') return;
      if (this.controlHandler) this.controlHandler(msg);
      else if (this.pendingControl.length < MAX_QUEUED_CONTROL) this.pendingControl.push(msg);
    });
  }

  /** Control messages (`window-resize`, `signal`) as parsed JSON, those sent before this call included. */
  onControl(handler: (msg: ControlMessage) => void): void {
    this.controlHandler = handler;
    for (const msg of this.pendingControl.splice(0)) handler(msg);
  }

  closeAll(): void {
    for (const socket of this.sockets.values()) {
      if (socket.readyState === socket.OPEN) socket.close(1000);
    }
  }
}

/**
 * A websocket operation about an instance: the client gets a secret per name in `secrets`; `body`
 * runs once every secret but `control` is open.
 */
export function sessionOperation(
  ctx: PluginContext, req: ApiRequest, name: string, description: string, secrets: string[],
  body: (sockets: SessionSockets, op: OperationControl) => Promise<Record<string, unknown> | void>,
): Operation {
  const sockets = new SessionSockets();
  return ctx.operations.create({
    class: 'websocket',
    description,
    project: req.project,
    requestor: req.requestor,
    resources: operationResources(name),
    secrets,
    requiredSecrets: secrets.filter((s) => s !== 'control'),
    connect: (secret, socket) => sockets.attach(secret, socket),
    run: (op) => body(sockets, op),
  });
}
