/**
 * The server as a preseed (like the reference's `init --dump`): server config, managed networks,
 * storage pools, profiles and projects. Fed back to a fresh daemon through `init --preseed`, it
 * recreates them. Beyond the reference's dump: projects, and networks of projects with their own
 * networks (`features.networks`), each with its `project`.
 */
import { yaml } from '../../sdk/lib/yaml/index.js';
import { inProject, must, type ApiCall } from './api.js';
import type { Preseed } from './preseed.js';

export async function dumpPreseed(api: ApiCall): Promise<Preseed> {
  const server = await must(api, 'GET', '/1.0', undefined, 'reading the server config');
  // A build without the projects plugin has only the default project, and no projects section to dump.
  const served = (await api('GET', '/1.0/projects')).status !== 404;
  const projects = served ? await must(api, 'GET', '/1.0/projects?recursion=1', undefined, 'listing projects') as any[] : [];
  const networks: NonNullable<Preseed['networks']> = [];
  const networkProjects = ['default', ...projects.filter((p) => p.name !== 'default' && p.config?.['features.networks'] === 'true').map((p) => p.name as string)];
  for (const project of networkProjects) {
    const list = await must(api, 'GET', inProject('/1.0/networks?recursion=1', project), undefined, `listing networks of project ${project}`) as any[];
    for (const net of list.filter((n) => n.managed)) {
      networks.push({ name: net.name, project, type: net.type, description: net.description ?? '', config: net.config ?? {} });
    }
  }
  const pools = await must(api, 'GET', '/1.0/storage-pools?recursion=1', undefined, 'listing storage pools') as any[];
  const profiles = await must(api, 'GET', '/1.0/profiles?recursion=1', undefined, 'listing profiles') as any[];
  // Write-only keys (a trust password) read back as `true`, not their value: fed back, that would set them to "true".
  const config = Object.fromEntries(Object.entries<unknown>(server.config ?? {}).filter(([, v]) => typeof v === 'string')) as Record<string, string>;
  const preseed: Preseed = {
    config,
    networks,
    storage_pools: pools.map((p) => ({ name: p.name, driver: p.driver, description: p.description ?? '', config: p.config ?? {} })),
    profiles: profiles.map((p) => ({ name: p.name, description: p.description ?? '', config: p.config ?? {}, devices: p.devices ?? {} })),
  };
  if (served) preseed.projects = projects.map((p) => ({ name: p.name, description: p.description ?? '', config: p.config ?? {} }));
  return preseed;
}

/**
 * YAML 1.1 rules for quoting, so text such as `yes`, `on` or `0755` stays text for readers of
 * either YAML version (the reference's decoder follows 1.1).
 */
export const preseedYaml = (preseed: Preseed): string => yaml().stringify(preseed, { version: '1.1' });
