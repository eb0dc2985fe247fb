/**
 * Exec and console sessions over raw websockets, as a careless or hostile client drives them: sockets
 * never opened, input sent at once, sockets closed, half-closed or opened twice, frames that are not
 * websocket frames. Nothing may be left running, and the daemon must stay up.
 */
import test from 'ava';
import net from 'node:net';
import type WebSocket from 'ws';
import { unixWebsocket, waitFor, type Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { callAndWait } from '../helpers/api.js';
import { processesWith } from '../helpers/processes.js';

let d: Daemon;
/** A number no other test's command line has: `sleep <marker>` is how a leftover command is found. */
const marker = 40000 + Math.floor(Math.random() * 20000);

test.before(async () => {
  d = await startWithImage();
  const created = await callAndWait(d, 'POST', '/1.0/instances', { name: 'sess', source: { type: 'image', alias: 'bb' } });
  if (created.op?.status !== 'Success') throw new Error(`create failed: ${created.op?.err}`);
  await callAndWait(d, 'PUT', '/1.0/instances/sess/state', { action: 'start' });
});

test.after.always(stopImageDaemons);

interface Session {
  url: string;
  fds: Record<string, string>;
}

async function exec(command: string[], extra: Record<string, unknown> = {}): Promise<Session> {
  const res = await d.request('POST', '/1.0/instances/sess/exec', { command, 'wait-for-websocket': true, interactive: false, ...extra });
  if (res.status !== 202) throw new Error(`exec refused: ${res.body}`);
  return { url: res.json.operation, fds: res.json.metadata.metadata.fds };
}

const open = (s: Session, name: string): Promise<WebSocket> => unixWebsocket(d.socket, `${s.url}/websocket?secret=${s.fds[name]}`);
const finished = async (s: Session) => (await d.request('GET', `${s.url}/wait?timeout=30`)).json.metadata;
const attachProcesses = () => processesWith(`-P ${d.dir}/`).filter((p) => /^(setpriv .*)?lxc-(attach|console) /.test(p.cmdline));
const text = (ws: WebSocket) => {
  let out = '';
  ws.on('message', (data) => (out += String(data)));
  return () => out;
};
const closed = (ws: WebSocket) => new Promise<void>((resolve) => (ws.readyState === ws.CLOSED ? resolve() : ws.once('close', () => resolve())));

test.serial('an exec whose websockets are not all opened in time fails as the reference does, and runs nothing', async (t) => {
  const never = await exec(['sleep', String(marker)]);
  const partly = await exec(['sleep', String(marker)]);
  const stdin = await open(partly, '0');
  const stdout = await open(partly, '1');
  for (const s of [never, partly]) {
    const op = await finished(s);
    t.is(op.status, 'Failure');
    t.is(op.err, 'Timed out waiting for websockets to connect');
  }
  await Promise.all([closed(stdin), closed(stdout)]);
  t.pass('the sockets a client did open are closed');
  t.deepEqual(processesWith(`sleep ${marker}`), []);
  t.deepEqual(attachProcesses(), []);
  const listed = (await d.request('GET', '/1.0/operations?recursion=1')).json.metadata;
  t.deepEqual(listed.running ?? [], []);
});

test.serial('a console nobody attaches to fails the same way', async (t) => {
  const res = await d.request('POST', '/1.0/instances/sess/console', { width: 80, height: 25 });
  t.is(res.status, 202);
  const op = (await d.request('GET', `${res.json.operation}/wait?timeout=30`)).json.metadata;
  t.is(op.status, 'Failure');
  t.is(op.err, 'Timed out waiting for websockets to connect');
  t.deepEqual(attachProcesses(), []);
});

test.serial('input and its end, sent as soon as stdin opens, reach the command before the other sockets open', async (t) => {
  const s = await exec(['cat']);
  const stdin = await open(s, '0');
  // As pylxd does: the payload, then an empty text message, before stdout and stderr are open.
  stdin.send(Buffer.from('early input\n'), { binary: true });
  stdin.send('');
  const stdout = await open(s, '1');
  const out = text(stdout);
  await open(s, '2');
  const op = await finished(s);
  t.is(op.status, 'Success');
  t.is(op.metadata.return, 0);
  await closed(stdout);
  t.is(out(), 'early input\n');
});

test.serial('closing the stdin socket is end of input too', async (t) => {
  const s = await exec(['sh', '-c', 'wc -c']);
  const stdin = await open(s, '0');
  const out = text(await open(s, '1'));
  await open(s, '2');
  stdin.send(Buffer.from('12345'), { binary: true });
  stdin.close();
  const op = await finished(s);
  t.is(op.metadata.return, 0);
  await waitFor(() => out().trim() === '5', 10000, 'the count');
  t.is(out().trim(), '5');
});

test.serial('an interactive exec ends its input with ^D on the terminal, after a partial line too', async (t) => {
  const s = await exec(['cat'], { interactive: true });
  const terminal = await open(s, '0');
  const out = text(terminal);
  terminal.send(Buffer.from('line\npartial'), { binary: true });
  terminal.send('');
  const op = await finished(s);
  t.is(op.status, 'Success');
  t.is(op.metadata.return, 0);
  await closed(terminal);
  t.regex(out(), /partial$/, 'the partial line reached cat');
});

/** A command that ignores the polite signals and leaves a child of its own, for the client to walk away from. */
const stubborn = () => ['sh', '-c', `trap "" TERM INT HUP; sleep ${marker}; true`];

for (const [how, leave] of [
  ['closes its control socket', async (sockets: Record<string, WebSocket>) => sockets.control!.close()],
  ['vanishes (every socket dropped)', async (sockets: Record<string, WebSocket>) => Object.values(sockets).forEach((ws) => ws.terminate())],
  ['half-closes its connections', async (sockets: Record<string, WebSocket>) => Object.values(sockets).forEach((ws) => (ws as any)._socket.end())],
] as const) {
  test.serial(`a client that ${how} ends the command and the operation`, async (t) => {
    const s = await exec(stubborn());
    const sockets: Record<string, WebSocket> = {};
    for (const name of ['0', '1', '2', 'control']) sockets[name] = await open(s, name);
    await waitFor(() => processesWith(`sleep ${marker}`).length > 0, 10000, 'the command to start');
    await leave(sockets);
    const op = await finished(s);
    t.not(op.status, 'Running');
    // SIGKILL is delivered, not awaited: a loaded machine may schedule the command's last breath a moment later.
    await waitFor(() => processesWith(`sleep ${marker}`).length === 0, 5000, 'the command to be gone').catch(() => undefined);
    t.deepEqual(processesWith(`sleep ${marker}`), []);
    t.deepEqual(attachProcesses(), []);
  });
}

test.serial('without a control socket (pylxd), a client that drops stdout ends the command', async (t) => {
  const s = await exec(stubborn());
  await open(s, '0');
  const stdout = await open(s, '1');
  await open(s, '2');
  await waitFor(() => processesWith(`sleep ${marker}`).length > 0, 10000, 'the command to start');
  stdout.terminate();
  const op = await finished(s);
  t.not(op.status, 'Running');
  await waitFor(() => processesWith(`sleep ${marker}`).length === 0, 5000, 'the command to be gone').catch(() => undefined);
  t.deepEqual(processesWith(`sleep ${marker}`), []);
});

test.serial('a socket opens once: a second client on the same secret is refused with the error envelope', async (t) => {
  const s = await exec(['cat']);
  const stdin = await open(s, '0');
  const again = await t.throwsAsync(open(s, '0')) as Error & { status: number; body: string };
  t.is(again.status, 400);
  t.is(JSON.parse(again.body).type, 'error');
  await open(s, '1');
  await open(s, '2');
  stdin.send('');
  t.is((await finished(s)).metadata.return, 0);
});

test.serial('a frame that is not a websocket frame drops that socket and leaves the daemon up', async (t) => {
  const s = await exec(['cat']);
  const raw = net.connect(d.socket);
  const upgraded = new Promise<void>((resolve) => raw.once('data', () => resolve()));
  raw.write(`GET ${s.url}/websocket?secret=${s.fds['0']} HTTP/1.1\r\nHost: corral\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n`
    + 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
  await upgraded;
  const gone = new Promise<void>((resolve) => raw.once('close', () => resolve()));
  raw.on('error', () => undefined);
  raw.write(Buffer.from([0x83, 0x80, 1, 2, 3, 4])); // opcode 3 is reserved
  await gone;
  t.is((await d.request('GET', '/1.0')).status, 200, 'the daemon still answers');
  // The dropped stdin was end of input: with its outputs opened, the command finishes.
  await open(s, '1');
  await open(s, '2');
  t.is((await finished(s)).metadata.return, 0);
});
