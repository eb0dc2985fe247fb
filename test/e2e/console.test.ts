/** `lxc console` attached to a real container's console through a pty, and its log. */
import test from 'ava';
import { createRequire } from 'node:module';
import { rmSync } from 'node:fs';
import { stopDaemons, waitFor, type Daemon, startWithPool } from '../helpers/daemon.js';
import { lxc, lxcEnv } from '../helpers/clients.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';

const require = createRequire(import.meta.url);
let d: Daemon;
let image: BusyboxImage;

test.before(async () => {
  image = buildBusyboxImage('gzip');
  d = await startWithPool();
  if ((await lxc(d.socket, 'image', 'import', image.unified, '--alias', 'bb')).status !== 0) throw new Error('image import failed');
});

test.after.always(async () => {
  await lxc(d.socket, 'delete', '--force', 'con');
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
});

test('lxc console reaches the console shell, detaches with ctrl+a q, and the log keeps what it printed', async (t) => {
  t.is((await lxc(d.socket, 'launch', 'bb', 'con')).status, 0);
  const pty = require('node-pty');
  const term = pty.spawn('lxc', ['console', 'con'], { cols: 100, rows: 30, env: lxcEnv(d.socket) });
  let out = '';
  term.onData((s: string) => (out += s));
  const exited = new Promise<number>((r) => term.onExit((e: { exitCode: number }) => r(e.exitCode)));
  await waitFor(() => out.includes('+a q'), 10000, 'the client banner');
  // The console shell (inittab respawns -/bin/sh on it) answers once it gets input.
  await waitFor(async () => {
    term.write('echo marker-$((6*7))\r');
    await new Promise((r) => setTimeout(r, 300));
    return out.includes('marker-42');
  }, 15000, 'the console shell');
  // The client reads its escape key and the command in separate reads.
  term.write('\x01');
  await new Promise((r) => setTimeout(r, 300));
  term.write('q');
  t.is(await exited, 0, 'ctrl+a q detaches');
  const log = await lxc(d.socket, 'console', 'con', '--show-log');
  t.is(log.status, 0);
  t.regex(log.stdout, /marker-42/);
  t.is((await d.request('DELETE', '/1.0/instances/con/console')).status, 200);
  t.notRegex((await lxc(d.socket, 'console', 'con', '--show-log')).stdout, /marker-42/, 'the log was cleared');
});
