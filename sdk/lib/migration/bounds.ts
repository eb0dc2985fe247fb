/**
 * How long each side waits on its peer. A peer that stays connected but silent would otherwise hold
 * the instance's lock (and a staging directory) forever; every wait of the protocol has one of these.
 * `CORRAL_MIGRATION_TIMEOUT` (seconds, in the daemon's environment) replaces all three, for slow
 * links or for tests that want a silent peer found quickly.
 */
export interface MigrationBounds {
  /** For the peer's header: it answers an offer at once. */
  answerMs: number;
  /** For the target's final control message after the last tree: it writes records, moves snapshots into place. */
  verdictMs: number;
  /** For a stream in which nothing moved either way (rsync and btrfs send keep it busy while they work). */
  idleMs: number;
}

export const DEFAULT_BOUNDS: MigrationBounds = { answerMs: 30_000, verdictMs: 600_000, idleMs: 300_000 };

export function migrationBounds(env: NodeJS.ProcessEnv = process.env): MigrationBounds {
  const seconds = Number(env.CORRAL_MIGRATION_TIMEOUT);
  if (!env.CORRAL_MIGRATION_TIMEOUT || !Number.isFinite(seconds) || seconds <= 0) return DEFAULT_BOUNDS;
  const ms = Math.round(seconds * 1000);
  return { answerMs: ms, verdictMs: ms, idleMs: ms };
}
