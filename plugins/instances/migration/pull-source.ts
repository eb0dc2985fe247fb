/**
 * Where the other end of an instance migration is: the `source` of `POST /1.0/instances` with
 * `type: migration` (pull: the peer as the shared library reads it, plus the instance's flags; push:
 * only the flags), and the `target` object of a push-mode `POST /1.0/instances/<name>`.
 */
import { badRequest } from '../../../sdk/index.js';
import { parsePeer, type MigrationPeer } from '../../../sdk/lib/migration/peer.js';

export interface PullSource extends MigrationPeer {
  instanceOnly: boolean;
}

const instanceOnlyOf = (source: Record<string, any>): boolean => source.instance_only === true || source.container_only === true;

function refuseLive(source: Record<string, any>): void {
  if (source.live === true) throw badRequest('Live migration is not supported by this build');
}

/** Push mode: the source will connect to this target's operation; only the flags matter here. */
export function pushSource(source: Record<string, any>): { instanceOnly: boolean } {
  refuseLive(source);
  return { instanceOnly: instanceOnlyOf(source) };
}

/** The `target` of a push-mode source request: the target's operation, certificate and secrets. */
export function pushTarget(target: Record<string, any>): PullSource {
  return { ...parsePeer(target ?? {}, 'migration target'), instanceOnly: false };
}

export function pullSource(source: Record<string, any>): PullSource {
  const mode = source.mode ?? 'pull';
  if (mode !== 'pull') throw badRequest(`Migration mode "${mode}" is not supported; use pull or push`);
  refuseLive(source);
  const peer = parsePeer(source, 'migration source');
  if (source.secrets.criu) throw badRequest('The source offers live state (a "criu" secret), which this build does not take');
  return { ...peer, instanceOnly: instanceOnlyOf(source) };
}
