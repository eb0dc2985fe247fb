/**
 * The daemon's log: the level from --log-level/--debug/--verbose and, live, from core.log_level (set
 * with the real lxc client); the file reopened on SIGHUP and rotated by the logrotate rule that
 * scripts/install-service.sh installs; journal lines when systemd's JOURNAL_STREAM is stdout.
 */
import test from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, fstatSync, mkdtempSync, openSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { corrald, nodeFlags, projectRoot, startDaemon, stopDaemons, unixRequest, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';

const scratch: string[] = [];
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  scratch.push(dir);
  return dir;
};

test.after.always(async () => {
  await stopDaemons();
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

const logOf = (d: Daemon, file = 'corral.log') => readFileSync(path.join(d.dir, file), 'utf8');
const records = (text: string) => text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { level: number; msg: string });

/** A request the HTTP parser refuses: the daemon logs it at debug level, and only there. */
async function sendGarbage(d: Daemon): Promise<void> {
  await new Promise<void>((resolve) => {
    const socket = net.connect(d.socket, () => socket.end('NOT HTTP AT ALL\r\n\r\n'));
    socket.on('data', () => {});
    socket.on('close', () => resolve());
    socket.on('error', () => resolve());
  });
}

const MALFORMED = 'malformed HTTP request';
const count = (text: string, msg: string) => records(text).filter((r) => r.msg === msg).length;

test.serial('the level comes from --log-level, --debug and --verbose: the file and stdout get that level and above', async (t) => {
  const debug = await startDaemon({ plugins: 'edge', args: ['--debug'] });
  await sendGarbage(debug);
  await waitFor(() => count(logOf(debug), MALFORMED) === 1, 10000, 'the debug line');
  t.true(debug.output().includes(MALFORMED), 'stdout has it too');
  await debug.stop();

  const warn = await startDaemon({ plugins: 'edge', args: ['--log-level', 'warn'] });
  await sendGarbage(warn);
  await lxcOk(t, warn.socket, 'info');
  t.false(records(logOf(warn)).some((r) => r.level < 40), 'nothing under warn in the file');
  t.false(warn.output().includes('corral is ready'), 'nor on stdout');
  await warn.stop();

  const verbose = await startDaemon({ plugins: 'edge', args: ['-v'] });
  await sendGarbage(verbose);
  t.is(count(logOf(verbose), 'corral is ready'), 1);
  t.is(count(logOf(verbose), MALFORMED), 0);
  await verbose.stop();
});

test.serial('core.log_level changes the level live (lxc config set/unset), wins over the flag, and refuses other values', async (t) => {
  const d = await startDaemon({ plugins: 'edge', args: ['--log-level', 'info'] });
  await sendGarbage(d);
  await lxcOk(t, d.socket, 'config', 'set', 'core.log_level', 'debug');
  t.is((await lxcOk(t, d.socket, 'config', 'get', 'core.log_level')).trim(), 'debug');
  await sendGarbage(d);
  await waitFor(() => count(logOf(d), MALFORMED) === 1, 10000, 'the debug line once the key says debug');

  await lxcOk(t, d.socket, 'config', 'set', 'core.log_level', 'error');
  await lxcOk(t, d.socket, 'config', 'set', 'user.note', 'x'); // an info line at most, not written now
  await lxcOk(t, d.socket, 'config', 'unset', 'core.log_level');
  await sendGarbage(d);
  await lxcOk(t, d.socket, 'info');
  t.is(count(logOf(d), MALFORMED), 1, 'unset: back to the flag\'s info level');

  const refused = await lxc(d.socket, 'config', 'set', 'core.log_level', 'loud');
  t.not(refused.status, 0);
  t.regex(refused.stderr, /core\.log_level.*debug, info, warn, error/);
  const res = await unixRequest(d.socket, 'PATCH', '/1.0', { config: { 'core.log_level': 'trace' } });
  t.is(res.status, 400);
  t.is((await unixRequest(d.socket, 'GET', '/1.0')).json.metadata.config['core.log_level'], undefined, 'nothing half-written');
  await d.stop();
});

test.serial('SIGHUP reopens the log file: after it was moved away, a new file gets the new lines', async (t) => {
  const d = await startDaemon({ plugins: 'edge', args: ['--debug'] });
  renameSync(path.join(d.dir, 'corral.log'), path.join(d.dir, 'corral.log.1'));
  await sendGarbage(d);
  await waitFor(() => count(logOf(d, 'corral.log.1'), MALFORMED) === 1, 10000, 'the moved file to keep its writer until the HUP');
  t.false(existsSync(path.join(d.dir, 'corral.log')));
  d.child.kill('SIGHUP');
  await waitFor(() => existsSync(path.join(d.dir, 'corral.log')), 10000, 'a new log file');
  await sendGarbage(d);
  await waitFor(() => count(logOf(d), MALFORMED) === 1, 10000, 'the new file to get the next lines');
  t.is(count(logOf(d, 'corral.log.1'), MALFORMED), 1, 'the moved file gets nothing more');
  t.is(count(logOf(d), 'log file reopened'), 1);
  t.is(await d.stop(), 0, 'HUP does not stop the daemon');
});

test.serial('the logrotate rule of install-service.sh rotates the file and the daemon goes on in a new one', async (t) => {
  if (spawnSync('logrotate', ['--version']).status !== 0) return t.pass('logrotate is not installed (scripts/install.sh installs it)');
  const d = await startDaemon({ plugins: 'edge' });
  const etc = tempDir('corral-logrotate-');
  const installed = spawnSync(path.join(projectRoot, 'scripts', 'install-service.sh'),
    ['--dir', d.dir, '--unit-dir', path.join(etc, 'units'), '--logrotate-dir', path.join(etc, 'logrotate.d'), '--no-enable'], { encoding: 'utf8' });
  t.is(installed.status, 0, installed.stderr);
  const rule = path.join(etc, 'logrotate.d', 'corrald');
  t.true(readFileSync(rule, 'utf8').includes(`${d.dir}/corral.log {`));

  const rotated = spawnSync('logrotate', ['-f', '-s', path.join(etc, 'state'), rule], { encoding: 'utf8' });
  t.is(rotated.status, 0, rotated.stderr);
  t.true(existsSync(path.join(d.dir, 'corral.log.1')), `rotated: ${readdirSync(d.dir).join(' ')}`);
  await waitFor(() => existsSync(path.join(d.dir, 'corral.log')) && count(logOf(d), 'log file reopened') === 1, 10000, 'the daemon to reopen after postrotate');
  t.is((fstatSync(openSync(path.join(d.dir, 'corral.log'), 'r')).mode & 0o777), 0o600);
  t.is(count(logOf(d, 'corral.log.1'), 'corral is ready'), 1, 'the old lines are in the rotated file');

  const again = spawnSync('logrotate', ['-f', '-s', path.join(etc, 'state'), rule], { encoding: 'utf8' });
  t.is(again.status, 0, again.stderr);
  t.true(existsSync(path.join(d.dir, 'corral.log.2.gz')), 'compressed one rotation later');
  await d.stop();
});

test.serial('under systemd (JOURNAL_STREAM names stdout) stdout gets journal lines with syslog priorities; elsewhere JSON', async (t) => {
  const run = async (journal: boolean) => {
    const dir = tempDir('corral-journal-');
    const out = path.join(dir, 'stdout');
    const fd = openSync(out, 'w');
    const st = fstatSync(fd, { bigint: true });
    const env = { ...process.env, JOURNAL_STREAM: journal ? `${st.dev}:${st.ino}` : '5:5' };
    const child = spawn(process.execPath, [...nodeFlags, corrald, '--dir', dir, '--plugins', 'edge', '--debug'], { env, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    const exited = new Promise<string>((resolve) => child.once('exit', (code, signal) => resolve(`exit ${code} ${signal}`)));
    // Ready, as its own output says (the last line of its start).
    await waitFor(() => readFileSync(out, 'utf8').includes('corral is ready'), 60000, 'the daemon to say it is ready');
    child.kill('SIGTERM');
    const how = await exited;
    return `${readFileSync(out, 'utf8')}${how}`;
  };
  const journal = await run(true);
  t.regex(journal, /^<6>corral is ready \{"plugins":\[/m);
  t.regex(journal, /^<7>host tool \{/m, 'debug lines at priority 7');
  t.false(/^\{"name":"corral"/m.test(journal));
  const plain = await run(false);
  t.regex(plain, /^\{"name":"corral".*"msg":"corral is ready"/m, 'a JOURNAL_STREAM that is not stdout is not the journal');
});
