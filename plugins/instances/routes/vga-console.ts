/**
 * The graphical console of an instance (`type: vga`): a websocket operation whose data socket `0`
 * may be opened any number of times, each opening a new connection to the instance's SPICE server
 * (a SPICE viewer opens one per channel: main, display, inputs...), bytes relayed both ways. The
 * operation lasts until its control socket closes, as with the reference; a client that never
 * opens the control socket lets the operation fail at the kernel's bound.
 */
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import type { ApiRequest, Operation, PluginContext } from '../../../sdk/index.js';
import { operationResources } from './paths.js';

/** What a client may send before its console connection is made (a SPICE link message is tiny). */
const EARLY_MAX = 1 << 20;

/**
 * Relays one websocket to one console connection once `opening` gives it; either side ending ends
 * both. What the client sends before the connection is made is kept (a viewer speaks first).
 */
function relay(socket: WebSocket, opening: Promise<Duplex>, onError: (err: Error) => void): void {
  let stream: Duplex | undefined;
  let ended = false;
  const early: Buffer[] = [];
  const end = () => {
    ended = true;
    stream?.destroy();
    if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) socket.close(1000);
  };
  const deliver = (chunk: Buffer) => {
    // Back-pressure: a viewer writing faster than the console reads waits for it.
    if (!stream!.write(chunk)) {
      socket.pause();
      stream!.once('drain', () => socket.resume());
    }
  };
  socket.on('message', (data: Buffer | ArrayBuffer | Buffer[]) => {
    const chunk = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as Buffer);
    if (stream) deliver(chunk);
    else if (early.reduce((n, c) => n + c.length, chunk.length) > EARLY_MAX) end();
    else early.push(chunk);
  });
  socket.on('close', end);
  socket.on('error', end);
  opening.then((s) => {
    if (ended) {
      s.destroy();
      return;
    }
    stream = s;
    for (const chunk of early.splice(0)) deliver(chunk);
    s.on('data', (chunk: Buffer) => {
      socket.send(chunk, { binary: true });
      if (socket.bufferedAmount > 1 << 20) {
        s.pause();
        const wait = setInterval(() => {
          if (socket.readyState !== socket.OPEN || socket.bufferedAmount < 1 << 18) {
            clearInterval(wait);
            s.resume();
          }
        }, 10);
      }
    });
    s.on('close', end);
    s.on('error', end);
  }, (err: Error) => {
    onError(err);
    if (socket.readyState === socket.OPEN) socket.close(1011, 'The graphical console is not available');
  });
}

export function vgaOperation(ctx: PluginContext, req: ApiRequest, name: string, open: () => Promise<Duplex>): Operation {
  const streams = new Set<Duplex>();
  let controlClosed: () => void = () => undefined;
  const closed = new Promise<void>((resolve) => (controlClosed = resolve));
  return ctx.operations.create({
    class: 'websocket',
    description: 'Showing console',
    project: req.project,
    requestor: req.requestor,
    resources: operationResources(name),
    secrets: ['0', 'control'],
    requiredSecrets: ['control'],
    reusableSecrets: ['0'],
    connect: (secret, socket) => {
      if (secret === 'control') {
        socket.once('close', () => controlClosed());
        return;
      }
      const opening = open();
      void opening.then((stream) => {
        streams.add(stream);
        stream.once('close', () => streams.delete(stream));
      }, () => undefined);
      relay(socket, opening, (err) => ctx.log.warn({ err, instance: name }, 'the graphical console could not be reached'));
    },
    run: async (op) => {
      await new Promise<void>((resolve) => {
        void closed.then(resolve);
        if (op.signal.aborted) resolve();
        else op.signal.addEventListener('abort', () => resolve(), { once: true });
      });
      for (const stream of streams) stream.destroy();
    },
  });
}
