/**
 * What QEMU is to the guest agent, on the host: two unix sockets joined, one the daemon's client
 * connects to (QEMU's chardev socket), one the agent connects to with `--connect` (its side of
 * the virtio-serial port). As with QEMU, what the agent writes while no daemon is connected is
 * dropped, and the daemon's side can come and go while the agent's stays.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { distRoot } from './daemon.js';

/** Where `npm run build` puts the agent: beside the plugin's compiled files, where the driver looks. */
export const agentBinary = path.join(distRoot, 'plugins', 'instance-qemu', 'guest', 'corral-agent');

export class AgentRelay {
  readonly dir = mkdtempSync(path.join(os.tmpdir(), 'agent-relay-'));
  readonly hostPath = path.join(this.dir, 'agent.sock');
  readonly guestPath = path.join(this.dir, 'guest.sock');
  agent: ChildProcess | undefined;
  private host: net.Socket | undefined;
  private guest: net.Socket | undefined;
  private servers: net.Server[] = [];

  async start(): Promise<void> {
    const listen = (where: string, onConnection: (socket: net.Socket) => void) => new Promise<void>((resolve) => {
      const server = net.createServer(onConnection);
      this.servers.push(server);
      server.listen(where, resolve);
    });
    await listen(this.hostPath, (socket) => {
      this.host?.destroy();
      this.host = socket;
      socket.on('data', (chunk) => this.guest?.write(chunk));
      socket.on('error', () => {});
      socket.on('close', () => { if (this.host === socket) this.host = undefined; });
    });
    await listen(this.guestPath, (socket) => {
      this.guest?.destroy();
      this.guest = socket;
      socket.on('data', (chunk) => { if (this.host && !this.host.destroyed) this.host.write(chunk); });
      socket.on('error', () => {});
      socket.on('close', () => { if (this.guest === socket) this.guest = undefined; });
    });
    this.agent = spawn(agentBinary, ['--connect', this.guestPath], { stdio: 'ignore' });
  }

  /** The daemon's side goes away (a daemon restart), the agent's stays. */
  dropHost(): void {
    this.host?.destroy();
  }

  /** Bytes straight to the agent, as a confused daemon would send them. */
  injectToGuest(bytes: Buffer): void {
    this.guest?.write(bytes);
  }

  async stop(): Promise<void> {
    this.agent?.kill('SIGKILL');
    this.host?.destroy();
    this.guest?.destroy();
    await Promise.all(this.servers.map((server) => new Promise((resolve) => server.close(resolve))));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
