/**
 * What a member remembers of its cluster, in `<dataDir>/cluster/state.json`: read at boot so that a
 * restarted member comes back clustered (etcd started, store on etcd, identity) before plugins register.
 */
import { readFile, rename, rm, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { EtcdMemberUrls } from '../../sdk/index.js';

export interface ClusterState {
  serverName: string;
  /** `host:port` of the member's cluster address. */
  address: string;
  etcd: EtcdMemberUrls & { initialCluster: string; state: 'new' | 'existing' };
}

export const clusterDir = (dataDir: string) => path.join(dataDir, 'cluster');
export const etcdDir = (dataDir: string) => path.join(clusterDir(dataDir), 'etcd');
const stateFile = (dataDir: string) => path.join(clusterDir(dataDir), 'state.json');

export async function readClusterState(dataDir: string): Promise<ClusterState | undefined> {
  let text: string;
  try {
    text = await readFile(stateFile(dataDir), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const state = JSON.parse(text) as ClusterState;
  if (!state.serverName || !state.etcd?.clientUrl) throw new Error(`${stateFile(dataDir)} is not a cluster state file`);
  return state;
}

/** Written whole or not at all (a rename over the old file). */
export async function writeClusterState(dataDir: string, state: ClusterState): Promise<void> {
  await mkdir(clusterDir(dataDir), { recursive: true, mode: 0o700 });
  const tmp = `${stateFile(dataDir)}.tmp`;
  await writeFile(tmp, JSON.stringify(state, null, 2), { mode: 0o600 });
  await rename(tmp, stateFile(dataDir));
}

export async function removeClusterState(dataDir: string): Promise<void> {
  await rm(stateFile(dataDir), { force: true });
}
