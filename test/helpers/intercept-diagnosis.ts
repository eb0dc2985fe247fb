/**
 * What to print when an intercepted call fails with ENOSYS inside a container: liblxc answers that
 * itself whenever it could not reach the seccomp proxy, and says why only in the container's
 * lxc.log. The daemon's lines about the proxy and the proxy's processes complete the picture.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { lxc, type ClientRun } from './clients.js';
import type { Daemon } from './daemon.js';

export async function interceptDiagnosis(d: Daemon, name: string): Promise<string> {
  const log = await d.request('GET', `/1.0/instances/${name}/logs/lxc.log`).catch((err: Error) => ({ status: 0, body: err.message }));
  const daemonLines = d.output().split('\n').filter((line) => /seccomp/i.test(line)).slice(-20);
  const proxies: string[] = [];
  for (const entry of readdirSync('/proc')) {
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (argv[0]?.endsWith('corral-seccomp-proxy')) proxies.push(`${entry}: ${argv.join(' ')} (${readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ').slice(0, 2).join(' ')})`);
    } catch { /* gone */ }
  }
  return [
    // The monitor's own account of its proxy connection (a failed reconnect leaves it without one for good), however far back.
    `lxc.log of ${name} (${log.status}), its proxy connection:`, ...String(log.body).split('\n').filter((line) => /reconnect|forward|connect to seccomp proxy|receive message from seccomp proxy|No seccomp proxy registered/.test(line)).slice(0, 20),
    'and its last lines:', String(log.body).split('\n').slice(-30).join('\n'),
    'the daemon about the proxy:', ...daemonLines,
    'proxy processes (pid: argv (state ppid)):', ...proxies,
  ].join('\n');
}

/** `lxc exec` that must succeed; an ENOSYS failure carries the diagnosis above. */
export async function execOk(t: { is(a: unknown, b: unknown, m?: string): unknown }, d: Daemon, name: string, ...args: string[]): Promise<ClientRun> {
  const res = await lxc(d.socket, 'exec', name, ...args);
  const why = res.status !== 0 && /Function not implemented/.test(res.stderr) ? `\n${await interceptDiagnosis(d, name)}` : '';
  t.is(res.status, 0, `lxc exec ${name} ${args.join(' ')}: ${res.stderr}${why}`);
  return res;
}
