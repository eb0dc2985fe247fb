/**
 * What an operator installs and types: `corrald --help` (every flag the parser takes and every
 * subcommand), `--version`, bad flags; the systemd units scripts/install-service.sh writes, checked
 * with systemd-analyze verify (this machine has no systemd as PID 1 to run them); the install split
 * (runtime packages cover every host tool a plugin declares) and the README's two lines, which CI runs.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot } from '../helpers/daemon.js';
import { corraldCli } from '../helpers/corrald-cli.js';
import { SUBCOMMANDS } from '../../bin/commands/index.js';
import { SDK_VERSION } from '../../sdk/index.js';

const scratch: string[] = [];
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  scratch.push(dir);
  return dir;
};
test.after.always(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

const source = (file: string) => readFileSync(path.join(projectRoot, file), 'utf8');

test('corrald --help describes every flag the daemon takes and every subcommand with its summary', async (t) => {
  const res = await corraldCli(['--help']);
  t.is(res.status, 0, res.stderr);
  // The flags as the parser spells them, so a new flag without help fails here.
  const flags = [...source('kernel/args.ts').matchAll(/case '(-{1,2}[a-z-]+)'/g)].map((m) => m[1]!);
  flags.push(...[...source('bin/run-daemon.ts').matchAll(/argv\[i\] === '(--[a-z-]+)'/g)].map((m) => m[1]!));
  t.true(flags.length >= 10, flags.join(' '));
  for (const flag of flags) t.regex(res.stdout, new RegExp(`^\\s+(-\\w, )?${flag}\\b`, 'm'), `${flag} is described`);
  t.true(Object.keys(SUBCOMMANDS).length >= 2);
  for (const [name, load] of Object.entries(SUBCOMMANDS)) {
    const { summary } = await load();
    t.true(res.stdout.includes(`  ${name}`) && res.stdout.includes(summary), `${name}: ${summary}`);
  }
  t.is((await corraldCli(['-h'])).stdout, res.stdout);
});

test('corrald --version prints the package version and the SDK version', async (t) => {
  const res = await corraldCli(['--version']);
  t.is(res.status, 0);
  t.is(res.stdout.trim(), `corrald ${JSON.parse(source('package.json')).version} (sdk ${SDK_VERSION})`);
});

test('an unknown flag, a missing value or a bad level exits 2 with the usage, and starts nothing', async (t) => {
  const dir = tempDir('corral-flags-');
  for (const args of [['--bogus'], ['--dir'], ['--log-level', 'loud'], ['--dir', dir, 'stray']]) {
    const res = await corraldCli(args);
    t.is(res.status, 2, args.join(' '));
    t.regex(res.stderr, /^corrald: .+\nUsage: corrald /, args.join(' '));
  }
  t.deepEqual(spawnSync('ls', ['-A', dir], { encoding: 'utf8' }).stdout, '');
});

test('install-service.sh writes units with this checkout\'s paths that systemd-analyze verify accepts without a warning', async (t) => {
  if (spawnSync('systemd-analyze', ['--version']).status !== 0) return t.pass('systemd-analyze is not installed');
  const etc = tempDir('corral-units-');
  const units = path.join(etc, 'system');
  const res = spawnSync(path.join(projectRoot, 'scripts', 'install-service.sh'),
    ['--dir', '/var/lib/corral-test', '--unit-dir', units, '--logrotate-dir', path.join(etc, 'logrotate.d'), '--', '--plugins', 'edge'], { encoding: 'utf8' });
  t.is(res.status, 0, res.stderr);
  const daemon = readFileSync(path.join(units, 'corrald.service'), 'utf8');
  const instances = readFileSync(path.join(units, 'corrald-instances.service'), 'utf8');
  const entry = path.join(projectRoot, 'dist', 'bin', 'corrald.js');
  // The daemon runs from the full set's bundle, as `npm start` does (any set of its plugins with --plugins).
  const bundle = path.join(projectRoot, 'dist', 'bundle', 'corrald-full.cjs');
  t.regex(daemon, new RegExp(`^ExecStart=${process.execPath.replace(/[.]/g, '\\.')} .*${bundle} --dir /var/lib/corral-test --plugins edge$`, 'm'));
  t.regex(daemon, new RegExp(`^ExecStartPost=.* ${entry} waitready --dir /var/lib/corral-test --timeout 600$`, 'm'));
  t.regex(daemon, /^KillMode=process$/m, 'a stop or restart leaves the containers running');
  // glibc's settings reach the daemon as `npm start` gives them (package.json config.mallocEnv).
  t.is(/^Environment=(.*)$/m.exec(daemon)?.[1], JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')).config.mallocEnv);
  t.regex(instances, new RegExp(`^ExecStop=-.* ${entry} shutdown --dir /var/lib/corral-test$`, 'm'));
  t.regex(instances, /^After=corrald\.service$/m, 'stops before the daemon at host shutdown');
  t.false(/@[A-Z_]+@/.test(daemon + instances), 'every placeholder is filled');

  const verify = spawnSync('systemd-analyze', ['verify', 'corrald.service', 'corrald-instances.service'], { cwd: units, encoding: 'utf8' });
  t.is(verify.status, 0, verify.stderr);
  t.is(verify.stderr.trim(), '', 'no warning');

  // The check itself catches a broken unit.
  writeFileSync(path.join(units, 'corrald.service'), daemon.replace('KillMode=', 'KilMode='));
  t.regex(spawnSync('systemd-analyze', ['verify', 'corrald.service'], { cwd: units, encoding: 'utf8' }).stderr, /Unknown key/);

  const bad = spawnSync(path.join(projectRoot, 'scripts', 'install-service.sh'), ['--bogus'], { encoding: 'utf8' });
  t.is(bad.status, 2);
  t.regex(bad.stderr, /unknown argument "--bogus"[\s\S]*Usage: scripts\/install-service\.sh/);
});

/** A bash array of scripts/install.sh. */
function packageList(name: string): string[] {
  const res = spawnSync('bash', ['-c', `eval "$(sed -n '/^${name}=(/,/)/p' scripts/install.sh)"; printf '%s\\n' "\${${name}[@]}"`], { cwd: projectRoot, encoding: 'utf8' });
  return res.stdout.split('\n').filter(Boolean);
}

/** The Debian package that ships a command, looked up under the usual directories (not PATH: pyenv shims and the like). */
function packageOf(tool: string): string | undefined {
  for (const dir of ['/usr/bin', '/usr/sbin', '/bin', '/sbin']) {
    const res = spawnSync('dpkg', ['-S', `${dir}/${tool}`], { encoding: 'utf8' });
    const line = res.stdout.split('\n').find((l) => !l.startsWith('diversion') && l.includes(': '));
    if (res.status === 0 && line) return line.slice(0, line.indexOf(':'));
  }
  return undefined;
}

test('the runtime packages (install.sh without --test) ship every host tool a plugin declares; the test-only ones are apart', (t) => {
  const runtime = packageList('RUNTIME_PACKAGES');
  const testOnly = packageList('TEST_PACKAGES');
  t.true(runtime.includes('lxc') && runtime.includes('lxd-client') && runtime.includes('busybox-static'), runtime.join(' '));
  for (const p of ['lxd', 'python3-pylxd', 'prometheus']) t.true(testOnly.includes(p) && !runtime.includes(p), p);
  const registry = JSON.parse(source('plugin-registry.json')) as { plugins: { id: string; hostTools?: string[] }[] };
  const tools = new Set(registry.plugins.flatMap((p) => p.hostTools ?? []));
  // What the runtime packages pull in (python3 brings python3-minimal, which ships /usr/bin/python3).
  const depends = spawnSync('dpkg-query', ['-W', '-f=${Pre-Depends},${Depends}\n', ...runtime], { encoding: 'utf8' }).stdout;
  const pulledIn = new Set(depends.split(/[,|\n]/).map((d) => d.trim().split(/[\s:(]/)[0]!).filter(Boolean));
  for (const tool of tools) {
    const pkg = packageOf(tool);
    if (!pkg) {
      t.fail(`no package ships ${tool}`);
      continue;
    }
    // The base system (priority required) is on every Debian machine.
    const priority = spawnSync('dpkg-query', ['-W', '-f=${Priority}', pkg], { encoding: 'utf8' }).stdout;
    t.true(runtime.includes(pkg) || pulledIn.has(pkg) || priority === 'required', `${tool} comes from ${pkg} (${priority}), not in the runtime list`);
  }
});

test('install.sh stops at once with what to do when Node.js is older than 20, and refuses unknown arguments', (t) => {
  const bin = tempDir('corral-old-node-');
  writeFileSync(path.join(bin, 'node'), '#!/bin/sh\necho 18\n');
  chmodSync(path.join(bin, 'node'), 0o755);
  const res = spawnSync(path.join(projectRoot, 'scripts', 'install.sh'), [], { env: { ...process.env, PATH: `${bin}:/usr/bin:/bin` }, encoding: 'utf8' });
  t.is(res.status, 1);
  t.regex(res.stderr, /needs Node\.js 20 or newer[\s\S]*deb\.nodesource\.com\/setup_20\.x[\s\S]*apt-get install -y nodejs/);
  const bad = spawnSync(path.join(projectRoot, 'scripts', 'install.sh'), ['--tests'], { encoding: 'utf8' });
  t.is(bad.status, 2);
});

test('the README shows the start line and the test line, and CI runs the test line exactly', (t) => {
  const readme = source('README.md');
  const ci = source('.ci/run').trim().split('\n').at(-1)!;
  t.is(ci, './scripts/install.sh --test && npm test');
  t.true(readme.includes(`\n    ${ci}\n`), 'the README\'s test line');
  t.regex(readme, /\n {4}\.\/scripts\/install\.sh && npm start -- --dir \/var\/lib\/corral\n/);
  t.true(readme.includes('./scripts/install-service.sh'), 'the service install');
});
