/**
 * After a crash (kill -9 mid-create or mid-delete) a volume or a driver directory may exist
 * without a record. Creates write the record last and deletes remove it first, so anything
 * without a record is a leftover: remove it at boot.
 */
import { chmod, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { type PluginContext } from '../../sdk/index.js';
import { CONTAINER_SNAPSHOT_MODE } from '../../sdk/lib/storage/index.js';
import { removeStaleStaging } from './migration/staging.js';
import { LOGS_MODE, volumeName, type InstanceManager } from './manager.js';
import { isHere } from './location.js';

/** Per-instance boot checks in flight at once: the API opens after them, and each is a few file system calls. */
const BOOT_CHECKS_IN_FLIGHT = 16;

/**
 * The owners and modes of instance directories (and container snapshots) this version gives them.
 * Creates, updates and starts give them as they go; a boot walks every instance once to bring what an
 * older version made up to date, then records this number in the data directory (the walk cost
 * ~35 µs an instance, 0.3–0.45 s of every restart with 11,000). Raise it when those rules change.
 */
const DIRECTORY_RULES = 1;
const DIRECTORY_RULES_FILE = 'instance-directory-rules';

async function eachBounded<T>(items: T[], fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(BOOT_CHECKS_IN_FLIGHT, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

export async function cleanupLeftovers(ctx: PluginContext, manager: InstanceManager): Promise<void> {
  // The index: parsed once for this and the boot's other walks, and kept for the first listings.
  const records = await manager.index.list();
  const rulesFile = path.join(ctx.dataDir, DIRECTORY_RULES_FILE);
  // Missing or unreadable: an older version's directory (or a first boot).
  const olderRules = !(Number(await readFile(rulesFile, 'utf8').catch(() => '')) >= DIRECTORY_RULES);
  // Keyed by pool too: a move between pools interrupted by a crash leaves a copy the record does not name.
  const known = new Set(records.map((s) => `${s.doc.pool}/${s.doc.type}/${s.project}/${s.name}`));
  const storage = manager.deps.storage;
  for (const pool of await storage.poolNames()) {
    const probes = await Promise.all((['container', 'virtual-machine'] as const).map((type) => storage.volumePath(pool, { type, project: 'default', name: 'probe' }).catch(() => undefined)));
    await removeStaleStaging(probes.filter((p): p is string => !!p));
    for (const type of ['container', 'virtual-machine'] as const) {
      const volumes = await storage.listVolumes(pool, type).catch(() => []);
      for (const vol of volumes) {
        if (known.has(`${pool}/${vol.type}/${vol.project}/${vol.name}`)) continue;
        ctx.log.warn({ pool, volume: vol }, 'removing an instance volume that has no record (left by a crash)');
        await storage.deleteVolume(pool, vol).catch((err) => ctx.log.error({ err }, 'leftover volume removal failed'));
      }
    }
  }
  // A snapshot's storage is made before its record: storage without a record is a leftover too.
  const snapshotRecords = new Set((await ctx.store.collection('snapshots').list()).map((s) => `${s.project}/${s.name}`));
  // In a cluster, only the instances held here have their storage and directories here.
  const held = ctx.cluster.enabled ? records.filter((s) => isHere(ctx.cluster, s.doc)) : records;
  // One read of each pool's snapshot directory for all its instances of a type (where the driver can), not one per instance.
  const groups = new Map<string, typeof held>();
  for (const s of held) {
    const key = `${s.doc.pool}\0${s.doc.type}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push(s);
  }
  const withSnapshots: { s: (typeof held)[number]; names: string[] }[] = [];
  for (const group of groups.values()) {
    const { pool, type } = group[0]!.doc;
    const lists = await storage.listSnapshotsOfMany(pool, type, group.map((s) => ({ type, project: s.project, name: s.name }))).catch(() => []);
    group.forEach((s, i) => {
      if (lists[i]?.length) withSnapshots.push({ s, names: lists[i]! });
    });
  }
  await eachBounded(withSnapshots, async ({ s, names }) => {
    const vol = { type: s.doc.type, project: s.project, name: s.name };
    for (const snap of names) {
      if (snapshotRecords.has(`${s.project}/${s.name}/${snap}`)) {
        // Made by an older version with the volume mode (read-only btrfs snapshots keep theirs).
        if (olderRules && s.doc.type === 'container') await chmod(await storage.snapshotPath(s.doc.pool, vol, snap), CONTAINER_SNAPSHOT_MODE).catch(() => undefined);
        continue;
      }
      ctx.log.warn({ pool: s.doc.pool, volume: vol, snapshot: snap }, 'removing a snapshot that has no record (left by a crash)');
      await storage.deleteSnapshot(s.doc.pool, vol, snap).catch((err) => ctx.log.error({ err }, 'leftover snapshot removal failed'));
    }
  });
  for (const driver of manager.deps.drivers.values()) {
    await driver.cleanup?.(records.map((s) => ({ project: s.project, name: s.name }))).catch((err) => ctx.log.error({ err }, 'driver leftover cleanup failed'));
  }
  // Directories made by an older version get the owners and modes of now.
  if (olderRules) {
    await eachBounded(held, async (s) => {
      const handle = await manager.handleFor(s).catch(() => undefined);
      await handle?.driver.secureFiles?.(handle.inst).catch((err) => ctx.log.warn({ err, instance: s.name }, 'securing the instance directory failed'));
    });
    await writeFile(rulesFile, `${DIRECTORY_RULES}\n`).catch((err) => ctx.log.warn({ err }, 'recording the directory rules failed: the next boot checks every instance again'));
  }
  const logs = path.join(ctx.dataDir, 'logs');
  await chmod(logs, LOGS_MODE).catch(() => undefined);
  const logNames = new Set(records.map((s) => volumeName(s.project, s.name)));
  for (const entry of await readdir(logs).catch(() => [] as string[])) {
    if (!logNames.has(entry)) await rm(path.join(logs, entry), { recursive: true, force: true });
  }
}
