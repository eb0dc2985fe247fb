/**
 * Stand-ins for the other end of a migration, for tests of what a daemon does when its peer lies or
 * goes silent: an HTTPS server on a loopback address with a certificate of its own, whose operation
 * websockets the daemon under test connects to with the secrets `control` and `fs`.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';
import { encodeHeader } from '../../sdk/lib/migration/index.js';
import { selfSigned } from './pki.js';
import { freePort } from './tls-client.js';

export interface FakePeer {
  /** The certificate the daemon is told to expect. */
  cert: string;
  /** The operation URL the daemon is told to connect to. */
  operation: string;
  close(): void;
}

/** A peer at `address` that hands each websocket the daemon opens to `onSocket`, named by its secret. */
export async function fakeMigrationPeer(address: string, onSocket: (secret: string, ws: WebSocket) => void): Promise<FakePeer> {
  const pki = mkdtempSync(path.join(tmpdir(), 'corral-migration-peer-'));
  const cert = selfSigned(pki, 'peer');
  const server = createHttpsServer({ cert: cert.cert, key: cert.key });
  const wss = new WebSocketServer({ noServer: true });
  const sockets: WebSocket[] = [];
  server.on('upgrade', (req, socket, head) => wss.handleUpgrade(req, socket, head, (ws) => {
    sockets.push(ws);
    onSocket(new URL(req.url!, 'https://x').searchParams.get('secret') ?? '', ws);
  }));
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, address, resolve));
  return {
    cert: cert.cert,
    operation: `https://${address}:${port}/1.0/operations/fake`,
    close: () => {
      for (const ws of sockets) ws.terminate();
      server.close();
      rmSync(pki, { recursive: true, force: true });
    },
  };
}

/**
 * A source that offers `header` on control (or, with none, a target that never answers), and records
 * what the daemon sends there.
 */
export async function headerPeer(address: string, header?: Parameters<typeof encodeHeader>[0]): Promise<FakePeer & { answers: Buffer[] }> {
  const answers: Buffer[] = [];
  const peer = await fakeMigrationPeer(address, (secret, ws) => {
    if (secret !== 'control') return;
    ws.on('message', (data) => answers.push(data as Buffer));
    if (header) ws.send(encodeHeader(header), { binary: true });
  });
  return { ...peer, answers };
}

/** Command lines of the rsync processes working under `dir` (a transfer's leftovers, or one to watch). */
export function rsyncsUnder(dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    let cmd = '';
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch {
      continue;
    }
    if (cmd.startsWith('rsync') && cmd.includes(dir)) found.push(cmd);
  }
  return found;
}

/** The `fs_progress` a daemon's running operations show, once one does (within about 5 s), or ''. */
export async function fsProgressOf(daemon: { request(method: string, url: string): Promise<{ json?: any }> }): Promise<string> {
  for (let i = 0; i < 100; i++) {
    const running = (await daemon.request('GET', '/1.0/operations?recursion=1')).json?.metadata?.running ?? [];
    const progress = running.map((op: any) => op.metadata?.fs_progress).find(Boolean);
    if (progress) return progress;
    await new Promise((r) => setTimeout(r, 50));
  }
  return '';
}
