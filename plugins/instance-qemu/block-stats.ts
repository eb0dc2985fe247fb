/**
 * Disk I/O of a running VM as QEMU counts it per drive (QMP `query-blockstats`): what the guest
 * read and wrote through each virtual disk, not what the QEMU process did on the host (which also
 * counts the kernel read at boot, the config share and QEMU's own files).
 */
import type { DiskIo } from '../../sdk/index.js';
import type { QmpClient } from './qmp.js';

interface BlockStats {
  device?: string;
  qdev?: string;
  stats?: { rd_bytes?: number; wr_bytes?: number; rd_operations?: number; wr_operations?: number };
}

/** Drive ids of the generated config, as the guest names their disks. */
const GUEST_NAMES: Record<string, string> = { root: 'vda' };

/** Answers undefined when QEMU does not answer within `timeoutMs` (a metrics scrape never waits longer). */
export async function readBlockStats(qmp: QmpClient, timeoutMs: number): Promise<DiskIo[] | undefined> {
  const drives = await qmp.execute<BlockStats[]>('query-blockstats', undefined, timeoutMs).catch(() => undefined);
  if (!Array.isArray(drives)) return undefined;
  return drives
    // Firmware flash drives are not disks the guest reads through a disk driver.
    .filter((d) => d.device && !d.device.startsWith('firmware-') && d.stats)
    .map((d) => ({
      device: GUEST_NAMES[d.device!] ?? d.device!,
      readBytes: d.stats!.rd_bytes ?? 0, readsCompleted: d.stats!.rd_operations ?? 0,
      writtenBytes: d.stats!.wr_bytes ?? 0, writesCompleted: d.stats!.wr_operations ?? 0,
    }));
}
