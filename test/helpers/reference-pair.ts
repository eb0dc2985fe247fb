/**
 * corral and a private reference daemon side by side, for the tests between them: corral with the
 * busybox image, the reference with the same image under alias `bb`, both listening on their own
 * loopback addresses and added to one client home as remotes `cor` and `ref`.
 */
import { readFileSync } from 'node:fs';
import { killContainers } from './daemon.js';
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

