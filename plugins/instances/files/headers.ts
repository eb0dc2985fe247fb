/** The X-LXD-* headers of the file API: parsing what clients send, rendering what GET answers. */
import { badRequest } from '../../../sdk/index.js';
import type { EntryInfo } from './root-fs.js';

export type PushType = 'file' | 'directory' | 'symlink';

export interface PushHeaders {
  type: PushType;
  append: boolean;
  uid?: number;
  gid?: number;
  mode?: number;
}

type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  const text = Array.isArray(value) ? value[0] : value;
  return text === undefined || text.trim() === '' ? undefined : text.trim();
}

/** An id: -1 means "not given" (what clients send when they do not care). */
function parseId(raw: string | undefined, name: string): number | undefined {
  if (raw === undefined || raw === '-1') return undefined;
  if (!/^\d{1,10}$/.test(raw) || Number(raw) > 0xfffffffe) throw badRequest(`Invalid ${name} header "${raw}"`);
  return Number(raw);
}

/**
 * A mode as Go's base-0 integers read it, which is what clients assume: `0644` and `0o644` are
 * octal, `420` decimal. Only permission bits are kept, as the reference does.
 */
function parseMode(raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '-1') return undefined;
  let value: number;
  if (/^0o?[0-7]+$/i.test(raw)) value = parseInt(raw.replace(/^0o?/i, '') || '0', 8);
  else if (/^[1-9]\d{0,5}$/.test(raw)) value = Number(raw);
  else throw badRequest(`Invalid X-LXD-mode header "${raw}"`);
  if (value > 0o7777) throw badRequest(`Invalid X-LXD-mode header "${raw}": more than permission bits`);
  return value & 0o777;
}

export function parsePushHeaders(headers: Headers): PushHeaders {
  const type = header(headers, 'x-lxd-type') ?? 'file';
  if (type !== 'file' && type !== 'directory' && type !== 'symlink') throw badRequest(`Bad file type: ${type}`);
  const write = header(headers, 'x-lxd-write') ?? 'overwrite';
  if (write !== 'overwrite' && write !== 'append') throw badRequest(`Bad file write mode: ${write}`);
  return {
    type,
    append: write === 'append',
    uid: parseId(header(headers, 'x-lxd-uid'), 'X-LXD-uid'),
    gid: parseId(header(headers, 'x-lxd-gid'), 'X-LXD-gid'),
    mode: parseMode(header(headers, 'x-lxd-mode')),
  };
}

/** `2026-11-23 11:58:17 +0000 UTC`, the form the reference sends. */
function goTime(d: Date): string {
  return `${d.toISOString().slice(0, 19).replace('T', ' ')} +0000 UTC`;
}

/** Headers describing an entry: mode in 4-digit octal of the permission bits, as the reference shows it. */
export function entryHeaders(info: EntryInfo): Record<string, string> {
  const type = info.kind === 'other' ? 'file' : info.kind;
  return {
    'X-LXD-type': type,
    'X-LXD-uid': String(info.uid),
    'X-LXD-gid': String(info.gid),
    'X-LXD-mode': (info.mode & 0o777).toString(8).padStart(4, '0'),
    'X-LXD-modified': goTime(info.mtime),
  };
}
