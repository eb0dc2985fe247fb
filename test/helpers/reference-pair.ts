/**
 * corral and a private reference daemon side by side, for the tests between them: corral with the
 * busybox image, the reference with the same image under alias `bb`, both listening on their own
 * loopback addresses and added to one client home as remotes `cor` and `ref`.
 */
import { readFileSync } from 'node:fs';
import { callAndWait } from './api.js';
import { killContainers, startDaemon, type Daemon } from './daemon.js';
import { startWithImage, stopImageDaemons, type ImageDaemon } from './image-daemon.js';
import { startReference, type ReferenceDaemon } from './reference-daemon.js';
import type { RemoteClient } from './remotes.js';

export interface ReferencePair {
  corral: ImageDaemon;
  ref: ReferenceDaemon;
}

export async function startReferencePair(client: RemoteClient, corralAddress: string, refAddress: string): Promise<ReferencePair> {
  const [corral, ref] = await Promise.all([startWithImage({ plugins: 'full' }), startReference()]);
  const up = await ref.call('POST', '/1.0/images', readFileSync(corral.image.unified), { 'content-type': 'application/octet-stream' });
  if (up.op?.status !== 'Success') throw new Error(`image import into the reference failed: ${up.op?.err ?? up.body}`);
  await ref.request('POST', '/1.0/images/aliases', { name: 'bb', target: up.op.metadata.fingerprint });
  const [cor, reference] = await Promise.all([client.listen(corral, corralAddress), client.listen(ref, refAddress)]);
  // One after the other: both write the client's one config file.
  await client.addUrl('cor', cor);
  await client.addUrl('ref', reference);
  return { corral, ref };
}

/** Stops both (what either still runs with them) and removes the client home. */
export async function stopReferencePair(pair: Partial<ReferencePair>, client: RemoteClient): Promise<void> {
  await pair.ref?.stop();
  if (pair.corral) killContainers(pair.corral.dir);
  await stopImageDaemons();
  client.remove();
}


/**
 * The reference and a bare corral (with a `default` dir pool, as the reference's helper makes one), each
 * enabled as a one-member cluster named m1 on its own loopback address: for comparing cluster answers.
 */
export async function startClusteredPair(refAddress: string, corralAddress: string): Promise<{ ref: ReferenceDaemon; corral: Daemon }> {
  const [ref, corral] = await Promise.all([startReference(), startDaemon({})]);
  const pool = await corral.request('POST', '/1.0/storage-pools', { name: 'default', driver: 'dir' });
  if (pool.status !== 200) throw new Error(pool.body);
  for (const [d, address] of [[ref, refAddress], [corral, corralAddress]] as const) {
    const set = await d.request('PUT', '/1.0', { config: { 'core.https_address': address } });
    if (set.status !== 200) throw new Error(set.body);
    const enabled = await callAndWait(d as Daemon, 'PUT', '/1.0/cluster', { server_name: 'm1', enabled: true });
    if (enabled.op?.status !== 'Success') throw new Error(`enable: ${enabled.body} ${enabled.op?.err}`);
  }
  return { ref, corral };
}
