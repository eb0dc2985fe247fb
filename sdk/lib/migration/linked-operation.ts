/**
 * The operation either end of a migration answers with, whichever of the two connects: given the
 * peer's operation, a task that connects to it; without one, a websocket operation whose `control`
 * and `fs` secrets (at the metadata's top, where the peer's client reads them) the peer connects with.
 * Either way `work` runs once both sockets are open, and they are closed when it ends.
 */
import type { WebSocket } from 'ws';
import type { Operation, OperationControl, OperationSpec, OperationsService } from '../../operations.js';
import { MigrationChannel } from './channel.js';
import { connectPeer, type MigrationPeer } from './peer.js';

export interface MigrationLink {
  control: MigrationChannel;
  fs: MigrationChannel;
}

export interface LinkedOperationSpec extends Pick<OperationSpec, 'description' | 'request' | 'project' | 'requestor' | 'resources' | 'mayCancel'> {
  /** The peer's operation to connect to; absent, the peer connects to ours. */
  peer?: MigrationPeer;
  work: (link: MigrationLink, op: OperationControl) => Promise<void>;
  /** Called once however the operation ends, also when it ends without running (a peer that never connects). */
  release?: () => void;
}

/** `dataDir` holds this server's certificate, presented when connecting to the peer. */
export function linkedOperation(operations: OperationsService, dataDir: string, spec: LinkedOperationSpec): Operation {
  const { peer, work, release, ...common } = spec;
  let released = false;
  const releaseOnce = () => {
    if (!released) release?.();
    released = true;
  };
  let created: Operation;
  if (peer) {
    created = operations.create({
      ...common,
      class: 'task',
      run: async (op) => {
        try {
          const link = await connectPeer(dataDir, peer, op.signal);
          try {
            await work(link, op);
          } finally {
            link.close();
          }
        } finally {
          releaseOnce();
        }
      },
    });
  } else {
    const sockets: Partial<MigrationLink> = {};
    created = operations.create({
      ...common,
      class: 'websocket',
      secrets: ['control', 'fs'],
      secretsAtTop: true,
      connect: (name: string, socket: WebSocket) => {
        if (name === 'control' || name === 'fs') sockets[name] = new MigrationChannel(socket, name);
      },
      // The kernel runs this only once both secrets were opened.
      run: async (op) => {
        const link = { control: sockets.control!, fs: sockets.fs! };
        try {
          await work(link, op);
        } finally {
          link.control.close();
          link.fs.close();
          releaseOnce();
        }
      },
    });
  }
  if (release) void created.done().then(releaseOnce, releaseOnce);
  return created;
}
