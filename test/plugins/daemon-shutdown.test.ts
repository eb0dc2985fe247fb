/**
 * SIGTERM while clients hold everything they can open: operations waiting for their websockets,
 * exec sessions whose commands ignore signals, a console, event listeners, keep-alive and half-sent
 * HTTP requests, a long /wait. The daemon must exit, cleanly and in bounded time, leaving no process.
 */
import test from 'ava';
import http from 'node:http';
import net from 'node:net';
import type WebSocket from 'ws';
import { unixRequest, unixWebsocket, waitFor } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons, type ImageDaemon } from '../helpers/image-daemon.js';
import { callAndWait } from '../helpers/api.js';
import { processesWith } from '../helpers/processes.js';

test.after.always(stopImageDaemons);

/** Far beyond what a clean stop takes here (a few seconds), far below the 30 s grace that used to be waited out. */
const EXIT_BOUND_MS = 25_000;

test('SIGTERM with sessions, listeners and half-open connections held: the daemon exits in bounded time and leaves no process', async (t) => {
  const d: ImageDaemon = await startWithImage();
  const marker = 40000 + Math.floor(Math.random() * 20000);
  await callAndWait(d, 'POST', '/1.0/instances', { name: 'held', source: { type: 'image', alias: 'bb' } });
  await callAndWait(d, 'PUT', '/1.0/instances/held/state', { action: 'start' });
  const held: (WebSocket | net.Socket)[] = [];

  // Operations whose websockets nobody opens.
  for (let i = 0; i < 20; i++) {
    const res = await d.request('POST', '/1.0/instances/held/exec', { command: ['sleep', String(marker)], 'wait-for-websocket': true });
    t.is(res.status, 202);
  }
  // Sessions whose commands ignore SIGTERM/SIGHUP and leave a child, with every socket open and never read.
  const stubborn = ['sh', '-c', `trap "" TERM INT HUP; sleep ${marker}; true`];
  let waitUrl = '';
  for (const interactive of [false, true]) {
    const res = await d.request('POST', '/1.0/instances/held/exec', { command: stubborn, 'wait-for-websocket': true, interactive });
    const fds: Record<string, string> = res.json.metadata.metadata.fds;
    for (const secret of Object.values(fds)) held.push(await unixWebsocket(d.socket, `${res.json.operation}/websocket?secret=${secret}`));
    waitUrl = `${res.json.operation}/wait`;
  }
  const console = await d.request('POST', '/1.0/instances/held/console', { width: 80, height: 25 });
  for (const secret of Object.values(console.json.metadata.metadata.fds as Record<string, string>)) {
    held.push(await unixWebsocket(d.socket, `${console.json.operation}/websocket?secret=${secret}`));
  }
  await waitFor(() => processesWith(`sleep ${marker}`).length >= 2, 10000, 'the commands to start');
  // An event listener, a keep-alive connection left idle, a request half sent, a /wait with no timeout.
  held.push(await unixWebsocket(d.socket, '/1.0/events'));
  const agent = new http.Agent({ keepAlive: true });
  await new Promise<void>((resolve) => http.get({ socketPath: d.socket, path: '/1.0', agent }, (res) => res.resume().on('end', resolve)));
  const half = net.connect(d.socket);
  half.on('error', () => undefined);
  half.write('GET /1.0 HTTP/1.1\r\nHost: corral\r\nX-Unfinished: ');
  held.push(half);
  const waiting = unixRequest(d.socket, 'GET', waitUrl).catch(() => undefined);

  const exited = new Promise<number | null>((resolve) => d.child.once('exit', (code) => resolve(code)));
  const signalled = Date.now();
  d.child.kill('SIGTERM');
  const code = await Promise.race([exited, new Promise<'still running'>((r) => setTimeout(() => r('still running'), EXIT_BOUND_MS))]);
  t.is(code, 0, 'a clean exit, in bounded time');
  t.log(`exited ${Date.now() - signalled} ms after SIGTERM`);
  await waiting;
  for (const h of held) 'terminate' in h ? h.terminate() : h.destroy();
  agent.destroy();
  t.deepEqual(processesWith(`sleep ${marker}`), [], 'no command left behind');
  t.deepEqual(processesWith(`-P ${d.dir}/`).filter((p) => /lxc-(attach|console) /.test(p.cmdline)), [], 'no lxc-attach or lxc-console left behind');
});
