/**
 * Applies a checked preseed in the reference's order: server config, storage pools, networks of
 * the default project, projects, networks of other projects (their projects exist by then),
 * profiles. New objects are created; existing ones get the given keys merged over theirs. Each step
 * records how to undo itself, and a failure undoes every step already taken, newest first, so a
 * half-bad preseed leaves the server as it was. The `cluster` section comes last (enabling makes the
 * server's objects the cluster's; a joiner must be bare but for its config), and undoes itself.
 */
import { readFile } from 'node:fs/promises';
import { find, InitError, inProject, must, type ApiCall } from './api.js';
import type { NetworkItem, Preseed } from './preseed.js';

const enc = encodeURIComponent;

/** Keeps `value` unless the preseed gives a non-empty one, as the reference's merge does. */
const descriptionOf = (given: string | undefined, current: string | undefined) => (given ? given : current ?? '');

/** The collection each section writes to: one the daemon does not serve fails the preseed before any change. */
const COLLECTIONS: [keyof Preseed, string][] = [
  ['storage_pools', '/1.0/storage-pools'], ['networks', '/1.0/networks'], ['projects', '/1.0/projects'], ['profiles', '/1.0/profiles'],
];

async function checkServed(api: ApiCall, preseed: Preseed): Promise<void> {
  const wanted = COLLECTIONS.filter(([section]) => (preseed[section] as unknown[] | undefined)?.length);
  if (preseed.networks?.some((n) => (n.project ?? 'default') !== 'default') && !wanted.some(([s]) => s === 'projects')) wanted.push(['projects', '/1.0/projects']);
  for (const [section, url] of wanted) {
    const res = await api('GET', url);
    if (res.status === 404) throw new InitError(`the preseed has ${section.replace('_', ' ')} but this daemon does not serve ${url} (its plugin is not in the running set)`);
  }
}

export async function applyPreseed(api: ApiCall, preseed: Preseed): Promise<void> {
  await checkServed(api, preseed);
  const undo: { what: string; run: () => Promise<unknown> }[] = [];
  /** Runs a step's undo only through the API, and keeps going when one fails so the rest are still undone. */
  const rollback = async (cause: Error): Promise<never> => {
    const failed: string[] = [];
    for (const step of undo.reverse()) {
      await step.run().catch((err: Error) => failed.push(`${step.what}: ${err.message}`));
    }
    if (failed.length) throw new InitError(`${cause.message}; undoing the preseed also failed (${failed.join('; ')})`);
    throw cause;
  };

  try {
    if (preseed.config && Object.keys(preseed.config).length) {
      const server = await must(api, 'GET', '/1.0', undefined, 'reading the server config');
      const before = { ...server.config };
      await must(api, 'PATCH', '/1.0', { config: preseed.config }, 'applying the server config');
      undo.push({ what: 'restoring the server config', run: () => must(api, 'PUT', '/1.0', { config: before }, 'restoring the server config') });
    }

    for (const pool of preseed.storage_pools ?? []) {
      const url = `/1.0/storage-pools/${enc(pool.name)}`;
      const current = await find(api, url, `reading storage pool ${pool.name}`);
      if (!current) {
        await must(api, 'POST', '/1.0/storage-pools', pool, `creating storage pool "${pool.name}"`);
        undo.push({ what: `deleting storage pool ${pool.name}`, run: () => must(api, 'DELETE', url, undefined, '') });
        continue;
      }
      if (current.driver !== pool.driver) throw new InitError(`storage pool "${pool.name}" exists with driver "${current.driver}", not "${pool.driver}"`);
      const before = { description: current.description ?? '', config: { ...current.config } };
      await must(api, 'PUT', url, { description: descriptionOf(pool.description, current.description), config: { ...current.config, ...pool.config } }, `updating storage pool "${pool.name}"`);
      undo.push({ what: `restoring storage pool ${pool.name}`, run: () => must(api, 'PUT', url, before, '') });
    }

    const applyNetwork = async (net: NetworkItem) => {
      const project = net.project ?? 'default';
      const url = inProject(`/1.0/networks/${enc(net.name)}`, project);
      const current = await find(api, url, `reading network ${net.name}`);
      if (!current) {
        const { project: _project, ...body } = net;
        await must(api, 'POST', inProject('/1.0/networks', project), body, `creating network "${net.name}" in project "${project}"`);
        undo.push({ what: `deleting network ${net.name}`, run: () => must(api, 'DELETE', url, undefined, '') });
        return;
      }
      if (net.type && current.type !== net.type) throw new InitError(`network "${net.name}" in project "${project}" exists with type "${current.type}", not "${net.type}"`);
      const before = { description: current.description ?? '', config: { ...current.config } };
      await must(api, 'PUT', url, { description: descriptionOf(net.description, current.description), config: { ...current.config, ...net.config } }, `updating network "${net.name}" in project "${project}"`);
      undo.push({ what: `restoring network ${net.name}`, run: () => must(api, 'PUT', url, before, '') });
    };
    const isDefault = (net: NetworkItem) => (net.project ?? 'default') === 'default';
    for (const net of (preseed.networks ?? []).filter(isDefault)) await applyNetwork(net);

    for (const project of preseed.projects ?? []) {
      const url = `/1.0/projects/${enc(project.name)}`;
      const current = await find(api, url, `reading project ${project.name}`);
      if (!current) {
        await must(api, 'POST', '/1.0/projects', project, `creating project "${project.name}"`);
        undo.push({ what: `deleting project ${project.name}`, run: () => must(api, 'DELETE', url, undefined, '') });
        continue;
      }
      const before = { description: current.description ?? '', config: { ...current.config } };
      await must(api, 'PUT', url, { description: descriptionOf(project.description, current.description), config: { ...current.config, ...project.config } }, `updating project "${project.name}"`);
      undo.push({ what: `restoring project ${project.name}`, run: () => must(api, 'PUT', url, before, '') });
    }

    for (const net of (preseed.networks ?? []).filter((n) => !isDefault(n))) await applyNetwork(net);

    for (const profile of preseed.profiles ?? []) {
      const url = `/1.0/profiles/${enc(profile.name)}`;
      const current = await find(api, url, `reading profile ${profile.name}`);
      if (!current) {
        await must(api, 'POST', '/1.0/profiles', profile, `creating profile "${profile.name}"`);
        undo.push({ what: `deleting profile ${profile.name}`, run: () => must(api, 'DELETE', url, undefined, '') });
        continue;
      }
      const before = { description: current.description ?? '', config: { ...current.config }, devices: structuredClone(current.devices ?? {}) };
      // A device the profile has already gets the given keys merged over its own, as in the reference.
      const devices: Record<string, Record<string, string>> = structuredClone(current.devices ?? {});
      for (const [name, dev] of Object.entries(profile.devices ?? {})) devices[name] = { ...devices[name], ...dev };
      await must(api, 'PUT', url, {
        description: descriptionOf(profile.description, current.description),
        config: { ...current.config, ...profile.config },
        devices,
      }, `updating profile "${profile.name}"`);
      undo.push({ what: `restoring profile ${profile.name}`, run: () => must(api, 'PUT', url, before, '') });
    }

    if (preseed.cluster?.enabled) {
      const { cluster_certificate_path: certificatePath, ...body } = preseed.cluster;
      if (certificatePath && !body.cluster_certificate) {
        body.cluster_certificate = await readFile(certificatePath, 'utf8').catch((err: Error) => {
          throw new InitError(`cannot read cluster.cluster_certificate_path ${certificatePath}: ${err.message}`);
        });
      }
      await must(api, 'PUT', '/1.0/cluster', body, body.cluster_address ? `joining the cluster at ${body.cluster_address}` : 'enabling clustering');
    }
  } catch (err) {
    return rollback(err as Error);
  }
}
