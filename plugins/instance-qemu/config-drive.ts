/**
 * The config drive: a host directory per VM, shared read-only over 9p (mount tag `config`), that
 * the guest's init mounts to find its agent, the agent's settings and a cloud-init NoCloud seed
 * made from the instance's `cloud-init.*` (and older `user.*`) keys. Rebuilt before each start so
 * that it always matches the config.
 */
import { existsSync } from 'node:fs';
import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DriverInstance } from '../../sdk/index.js';

/** Where the static guest agent may be: an explicit path, then the build output beside the sources. */
export function agentBinaryCandidates(): string[] {
  const here = path.dirname(fileURLToPath(import.meta.url));
  // dist/plugins/instance-qemu -> the repository's plugins/instance-qemu.
  const repo = path.resolve(here, '../../..');
  return [
    process.env.CORRAL_VM_AGENT ?? '',
    path.join(repo, 'plugins/instance-qemu/guest/build/corral-agent'),
    path.join(here, 'guest/corral-agent'),
    '/usr/lib/corral/corral-agent',
  ].filter(Boolean);
}

export const findAgentBinary = (): string | undefined => agentBinaryCandidates().find((p) => existsSync(p));

/** The first of `keys` set in `config`. */
const first = (config: Record<string, string>, keys: string[]) => keys.map((k) => config[k]).find((v) => v !== undefined);

export async function buildConfigDrive(dir: string, inst: DriverInstance, agent: string | undefined): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(path.join(dir, 'cloud-init'), { recursive: true, mode: 0o755 });
  if (agent) await copyFile(agent, path.join(dir, 'agent'));
  const uuid = inst.config['volatile.uuid'] ?? '';
  await writeFile(path.join(dir, 'agent.conf'), `${JSON.stringify({ name: inst.name, project: inst.project, uuid, port: 'org.corral.agent' }, null, 2)}\n`);
  const c = inst.config;
  const userData = first(c, ['cloud-init.user-data', 'user.user-data']) ?? '#cloud-config\n{}\n';
  const vendorData = first(c, ['cloud-init.vendor-data', 'user.vendor-data']) ?? '#cloud-config\n{}\n';
  const network = first(c, ['cloud-init.network-config', 'user.network-config']);
  const files: Record<string, string> = {
    'meta-data': `instance-id: ${uuid || inst.name}\nlocal-hostname: ${inst.name}\n`,
    'user-data': userData,
    'vendor-data': vendorData,
  };
  if (network !== undefined) files['network-config'] = network;
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, 'cloud-init', name), text);
}
