/**
 * Storage drivers, network types and NIC types register through their families' extension points
 * while plugins register (test/fixtures/late-registrar keeps all three); once the daemon runs,
 * every registration is refused, and the real `lxc` client still finds the late type unknown.
 */
import test from 'ava';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot, startDaemon, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { hasLxc, lxc } from '../helpers/clients.js';

let d: Daemon;
let work: string;

const serial = hasLxc() ? test.serial : test.serial.skip;
if (!hasLxc()) console.log('type-registration: skipped, the lxc client (lxd-client) is not installed');

test.before(async () => {
  if (!hasLxc()) return;
  work = mkdtempSync(path.join(tmpdir(), 'corral-e2e-late-'));
  // The edge set and the registrar, from a registry file beside the installed one.
  const registry = JSON.parse(readFileSync(path.join(projectRoot, 'plugin-registry.json'), 'utf8'));
  registry.plugins.push({
    id: 'late-registrar', entry: 'test/fixtures/late-registrar/index.ts', version: '1.0.0', sdk: '^2.0.0',
    requires: { storage: '^0.1.0', networks: '^0.1.0', 'nic-devices': '^0.1.0' },
  });
  const file = path.join(work, 'registry.json');
  writeFileSync(file, JSON.stringify(registry));
  d = await startDaemon({ plugins: [...registry.sets.edge, 'late-registrar'].join(','), args: ['--registry', file] });
});

test.after.always(async () => {
  await stopDaemons();
  if (work) rmSync(work, { recursive: true, force: true });
});

serial('registration of storage drivers, network types and NIC types is closed once plugins have registered', async (t) => {
  const late = await d.request('POST', '/1.0/late-registrar');
  t.is(late.status, 200);
  const points = { storage: 'storage', network: 'networks', nic: 'nic-types' } as const;
  for (const [kind, point] of Object.entries(points)) {
    const attempt = late.json.metadata[kind];
    t.false(attempt.registered, `${kind}: ${JSON.stringify(attempt)}`);
    t.is(attempt.error, `extension point "${point}.registration" is only open while plugins register (register${kind === 'nic' ? 'NicType' : 'Driver'} called later)`);
  }

  const pool = await lxc(d.socket, 'storage', 'create', 'late', 'latecomer');
  t.not(pool.status, 0, 'the late storage driver is not known');
  t.regex(pool.stderr, /Storage driver "latecomer" is not supported/);
  const net = await lxc(d.socket, 'network', 'create', 'late0', '--type=latecomer');
  t.not(net.status, 0, 'the late network type is not known');
  t.regex(net.stderr, /latecomer/);
  const nic = await lxc(d.socket, 'profile', 'device', 'add', 'default', 'late', 'nic', 'nictype=latecomer', 'parent=lo');
  t.not(nic.status, 0, 'the late nictype is not known');
  t.regex(nic.stderr, /latecomer/);
});
