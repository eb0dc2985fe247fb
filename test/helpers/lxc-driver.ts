/**
 * Set-up for tests of the liblxc driver on its own: real host tools, a busybox image, a private
 * data dir under a passable scratch dir, and a run() that executes a command in a container.
 */
import bunyan from 'bunyan';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createHostTools } from '../../kernel/host-tools/host-tools.js';
import type { DriverInstance, ExecSpec } from '../../sdk/index.js';
import { LxcDriver } from '../../plugins/instance-lxc/driver.js';
import { buildBusyboxImage } from './busybox-image.js';

export const CONTAINER_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export function lxcDriverFixture(name: string) {
  const log = bunyan.createLogger({ name, level: 'fatal' });
  const tools = createHostTools(log);
  const scratch = mkdtempSync(path.join(tmpdir(), `corral-${name}-`));
  // Above the data dir is the admin's business: make it passable, as /var/lib is. The data dir itself
  // stays private (0700): the driver must open it up for the containers' mapped root.
  chmodSync(scratch, 0o711);
  const image = buildBusyboxImage('none');
  const dataDir = path.join(scratch, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  const driver = new LxcDriver({ hostTools: tools, log, dataDir });
  return { log, tools, run: randomBytes(3).toString('hex'), scratch, image, dataDir, driver };
}

/** Runs `command` in the container to its end, collecting its output. */
export async function runIn(driver: LxcDriver, inst: DriverInstance, command: string[], extra: Partial<ExecSpec> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const session = await driver.exec(inst, { command, environment: { PATH: CONTAINER_PATH, HOME: '/root' }, interactive: false, ...extra });
  let stdout = '';
  let stderr = '';
  session.stdout.on('data', (c: Buffer) => (stdout += c));
  session.stderr!.on('data', (c: Buffer) => (stderr += c));
  session.stdin.end();
  const code = await session.exited;
  return { code, stdout, stderr };
}
