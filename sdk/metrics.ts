/**
 * Figures of one running instance, as an instance driver reads them for `GET /1.0/metrics`.
 * Plain numbers in base units (seconds, bytes, counts); the metrics plugin names and labels them.
 */

/** CPU time of one CPU (or of all CPUs as `cpu: "0"` where the host only keeps totals). */
export interface CpuTime {
  cpu: string;
  /** Seconds. */
  user: number;
  system: number;
}

/** Memory figures, named as the `lxd_memory_<name>_bytes` families name them. */
export const MEMORY_FIGURES = [
  'Active_anon', 'Active_file', 'Active', 'Cached', 'Dirty', 'Inactive_anon', 'Inactive_file', 'Inactive',
  'Mapped', 'MemAvailable', 'MemFree', 'MemTotal', 'RSS', 'Shmem', 'Swap', 'Unevictable', 'Writeback',
] as const;
export type MemoryFigure = (typeof MEMORY_FIGURES)[number];

export interface DiskIo {
  /** Block device name (`sda`, `nvme0n1`). */
  device: string;
  readBytes: number;
  readsCompleted: number;
  writtenBytes: number;
  writesCompleted: number;
}

export interface FilesystemUsage {
  /** Block device backing the filesystem ("" when there is none, e.g. a directory pool). */
  device: string;
  fstype: string;
  /** Where the instance sees it (`/` for the root disk). */
  mountpoint: string;
  sizeBytes: number;
  freeBytes: number;
  availBytes: number;
}

export interface InterfaceCounters {
  device: string;
  receiveBytes: number;
  receivePackets: number;
  receiveErrs: number;
  receiveDrop: number;
  transmitBytes: number;
  transmitPackets: number;
  transmitErrs: number;
  transmitDrop: number;
}

export interface InstanceMetrics {
  cpu: CpuTime[];
  memory: Partial<Record<MemoryFigure, number>>;
  disk: DiskIo[];
  filesystems: FilesystemUsage[];
  network: InterfaceCounters[];
  processes: number;
}
