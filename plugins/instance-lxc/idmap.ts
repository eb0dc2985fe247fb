/**
 * Id maps of unprivileged containers. An instance maps container ids 0..n onto a range of host ids
 * taken from root's subordinate ids (/etc/subuid, /etc/subgid). By default every container shares
 * the whole range, as the reference does; `security.idmap.isolated` gives an instance a range of
 * its own; `raw.idmap` punches host ids straight through. The JSON form of a map is the one the
 * reference stores in `volatile.idmap.*`.
 */
import { readFileSync } from 'node:fs';
import { truthy, type IdmapEntry } from '../../sdk/index.js';

export type { IdmapEntry };

export interface IdRange {
  start: number;
  size: number;
}

export interface SubordinateIds {
  uid: IdRange;
  gid: IdRange;
}

export interface RawIdmapEntry {
  kind: 'uid' | 'gid' | 'both';
  host: number;
  ns: number;
  range: number;
}

/** What the daemon falls back to when root has no subordinate ids listed. */
const DEFAULT_RANGE: IdRange = { start: 1_000_000, size: 1_000_000_000 };
/** Size of an isolated map when `security.idmap.size` is not set. */
export const ISOLATED_SIZE = 65536;

/** Every range a subid file (`user:start:count` lines) gives to a user. */
export function readSubidRanges(file: string, user = 'root'): IdRange[] {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const ranges: IdRange[] = [];
  for (const line of text.split('\n')) {
    const [owner, start, size] = line.trim().split(':');
    if (owner !== user || !/^\d+$/.test(start ?? '') || !/^\d+$/.test(size ?? '')) continue;
    ranges.push({ start: Number(start), size: Number(size) });
  }
  return ranges;
}

/** Root's largest range in a subid file: the shared map. */
export function readSubidRange(file: string, user = 'root'): IdRange {
  const ranges = readSubidRanges(file, user);
  return ranges.reduce<IdRange | undefined>((best, r) => (!best || r.size > best.size ? r : best), undefined) ?? { ...DEFAULT_RANGE };
}

export function readSubordinateIds(): SubordinateIds {
  return { uid: readSubidRange('/etc/subuid'), gid: readSubidRange('/etc/subgid') };
}

/**
 * liblxc writes maps through newuidmap/newgidmap, which map only host ids that /etc/subuid and
 * /etc/subgid give to root, or the caller's own id alone. Once the uid map maps the daemon's own
 * uid (root mapping itself into a container: `raw.idmap=both 0 0`), liblxc writes the maps itself
 * and any host id goes. Say which entry is missing rather than let the start fail inside liblxc.
 */
export function checkDelegated(map: IdmapEntry[], delegated: { uid: IdRange[]; gid: IdRange[] }, self: { uid: number; gid: number } = ownIds()): void {
  const holds = (e: IdmapEntry, id: number) => e.Hostid <= id && id < e.Hostid + e.Maprange;
  if (map.some((e) => e.Isuid && holds(e, self.uid))) return;
  const covered = (ranges: IdRange[], e: IdmapEntry) => ranges.some((r) => e.Hostid >= r.start && e.Hostid + e.Maprange <= r.start + r.size);
  for (const e of map) {
    for (const kind of ['uid', 'gid'] as const) {
      if (!(kind === 'uid' ? e.Isuid : e.Isgid) || covered(delegated[kind], e)) continue;
      if (e.Maprange === 1 && e.Hostid === self[kind]) continue;
      const last = e.Hostid + e.Maprange - 1;
      const what = e.Maprange === 1 ? `host ${kind} ${e.Hostid}` : `host ${kind}s ${e.Hostid}-${last}`;
      throw new Error(`The id map uses ${what}, which /etc/sub${kind} does not give to root (add "root:${e.Hostid}:${e.Maprange}" to /etc/sub${kind})`);
    }
  }
}

function ownIds(): { uid: number; gid: number } {
  return { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
}

function parseIdRange(text: string, line: string): [number, number] {
  const m = /^(\d+)(?:-(\d+))?$/.exec(text);
  if (!m) throw new Error(`Invalid ID map line "${line}"`);
  const first = Number(m[1]);
  const last = m[2] === undefined ? first : Number(m[2]);
  if (last < first) throw new Error(`Invalid ID map line "${line}"`);
  return [first, last - first + 1];
}

/** `raw.idmap`: lines of `uid|gid|both <host>[-<last>] <container>[-<last>]`. */
export function parseRawIdmap(text: string): RawIdmapEntry[] {
  const entries: RawIdmapEntry[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const fields = line.split(/\s+/);
    if (fields.length !== 3 || !['uid', 'gid', 'both'].includes(fields[0]!)) throw new Error(`Invalid ID map line "${line}"`);
    const [host, hostSize] = parseIdRange(fields[1]!, line);
    const [ns, nsSize] = parseIdRange(fields[2]!, line);
    if (hostSize !== nsSize) throw new Error(`The ID map ranges are of different sizes "${line}"`);
    entries.push({ kind: fields[0] as RawIdmapEntry['kind'], host, ns, range: hostSize });
  }
  return entries;
}

/** Remove container ids [ns, ns+range) from a list of entries, splitting those it cuts through. */
function punch(entries: IdmapEntry[], ns: number, range: number): IdmapEntry[] {
  const out: IdmapEntry[] = [];
  const end = ns + range;
  for (const e of entries) {
    const eEnd = e.Nsid + e.Maprange;
    if (eEnd <= ns || e.Nsid >= end) {
      out.push(e);
      continue;
    }
    if (e.Nsid < ns) out.push({ ...e, Maprange: ns - e.Nsid });
    if (eEnd > end) out.push({ ...e, Hostid: e.Hostid + (end - e.Nsid), Nsid: end, Maprange: eEnd - end });
  }
  return out;
}

/**
 * The full map of an instance: uid entries then gid entries, each ordered by container id, with
 * `raw.idmap` entries cut out of the base ranges (a `both` entry shows in both halves).
 */
export function buildIdmap(base: { uid: IdRange; gid: IdRange }, raw: RawIdmapEntry[]): IdmapEntry[] {
  const half = (kind: 'uid' | 'gid'): IdmapEntry[] => {
    const range = base[kind];
    let entries: IdmapEntry[] = [{ Isuid: kind === 'uid', Isgid: kind === 'gid', Hostid: range.start, Nsid: 0, Maprange: range.size }];
    for (const r of raw) {
      if (r.kind !== kind && r.kind !== 'both') continue;
      entries = punch(entries, r.ns, r.range);
      entries.push({ Isuid: r.kind !== 'gid', Isgid: r.kind !== 'uid', Hostid: r.host, Nsid: r.ns, Maprange: r.range });
    }
    return entries.sort((a, b) => a.Nsid - b.Nsid);
  };
  return [...half('uid'), ...half('gid')];
}

/** `lxc.idmap` values (`u|g <container> <host> <count>`), uid lines first; a `both` entry (listed in each half) once per kind. */
export function idmapLines(map: IdmapEntry[]): string[] {
  const uid = map.filter((e) => e.Isuid).map((e) => `u ${e.Nsid} ${e.Hostid} ${e.Maprange}`);
  const gid = map.filter((e) => e.Isgid).map((e) => `g ${e.Nsid} ${e.Hostid} ${e.Maprange}`);
  return [...new Set([...uid, ...gid])];
}

/** The stored JSON form: `both` entries are listed once in each half, as built. */
export function idmapJson(map: IdmapEntry[]): string {
  return JSON.stringify(map.map((e) => ({ Isuid: e.Isuid, Isgid: e.Isgid, Hostid: e.Hostid, Nsid: e.Nsid, Maprange: e.Maprange })));
}

export function parseIdmapJson(text: string | undefined): IdmapEntry[] | undefined {
  if (!text) return undefined;
  try {
    const value = JSON.parse(text) as unknown;
    if (!Array.isArray(value)) return undefined;
    return value.filter((e): e is IdmapEntry => typeof e?.Hostid === 'number' && typeof e?.Maprange === 'number');
  } catch {
    return undefined;
  }
}

/** Host ids an isolated instance holds: from its base to the end of its own block in the stored map. */
export function heldRange(config: Record<string, string>): IdRange | undefined {
  const base = Number(config['volatile.idmap.base'] || 0);
  if (!base) return undefined;
  const map = parseIdmapJson(config['volatile.idmap.next']) ?? parseIdmapJson(config['volatile.idmap.current']) ?? [];
  // Raw entries map host ids the admin chose (outside the block): they do not count.
  const end = Math.max(0, ...map.filter((e) => e.Hostid >= base).map((e) => e.Hostid + e.Maprange));
  return { start: base, size: end > base ? end - base : Number(config['security.idmap.size'] || ISOLATED_SIZE) };
}

/** Whether an instance asks for a map of its own (and so one nobody else may share). */
export function holdsOwnRange(config: Record<string, string>): boolean {
  return !truthy(config['security.privileged']) && truthy(config['security.idmap.isolated']);
}

/**
 * The first free block of `size` host ids for an isolated map. The first 65536 ids of the range
 * are left to the shared map's usual footprint, as the reference does.
 */
export function allocateRange(range: IdRange, size: number, taken: IdRange[]): number {
  let candidate = range.start + ISOLATED_SIZE;
  for (const t of [...taken].sort((a, b) => a.start - b.start)) {
    if (t.start + t.size <= candidate) continue;
    if (t.start >= candidate + size) break;
    candidate = t.start + t.size;
  }
  if (size > range.size || candidate + size > range.start + range.size) throw new Error('Not enough uid/gid available for the container');
  return candidate;
}

export function overlaps(a: IdRange, b: IdRange): boolean {
  return a.start < b.start + b.size && b.start < a.start + a.size;
}

/** The map an instance's config asks for, given its host base (isolated) or the shared range. */
export interface IdmapPlan {
  privileged: boolean;
  /** Host id where an isolated map starts; 0 for the shared map. */
  base: number;
  map: IdmapEntry[];
}

export function planIdmap(config: Record<string, string>, ids: SubordinateIds, isolatedBase: () => number): IdmapPlan {
  if (truthy(config['security.privileged'])) return { privileged: true, base: 0, map: [] };
  const raw = parseRawIdmap(config['raw.idmap'] ?? '');
  if (!holdsOwnRange(config)) return { privileged: false, base: 0, map: buildIdmap(ids, raw) };
  const size = Number(config['security.idmap.size'] || ISOLATED_SIZE);
  const base = isolatedBase();
  const own = { start: base, size };
  return { privileged: false, base, map: buildIdmap({ uid: own, gid: own }, raw) };
}
