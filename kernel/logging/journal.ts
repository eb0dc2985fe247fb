/**
 * Under systemd, stdout is a stream to journald (JOURNAL_STREAM names its device and inode). There a
 * line starts with the syslog priority in angle brackets, so `journalctl -p` filters by level.
 */
import { fstatSync } from 'node:fs';
import type { LogRecord } from './logger.js';

/** True when stdout is the journal stream systemd gave this process (not a pipe a child inherited elsewhere). */
export function stdoutIsJournal(env: NodeJS.ProcessEnv = process.env): boolean {
  const [dev, ino] = (env.JOURNAL_STREAM ?? '').split(':');
  if (!dev || !ino) return false;
  try {
    const st = fstatSync(1, { bigint: true });
    return String(st.dev) === dev && String(st.ino) === ino;
  } catch {
    return false;
  }
}

/** bunyan levels (fatal 60 … debug 20) to syslog priorities (crit 2 … debug 7). */
function priority(level: number): number {
  if (level >= 60) return 2;
  if (level >= 50) return 3;
  if (level >= 40) return 4;
  if (level >= 30) return 6;
  return 7;
}

/** One journal line: priority, message, then the record's own fields as JSON (journald adds time, host and pid). */
export function journalLine(record: LogRecord, json: (value: unknown) => string): string {
  const { msg, level, name: _n, hostname: _h, pid: _p, time: _t, v: _v, ...fields } = record;
  const extra = Object.keys(fields).length ? ` ${json(fields)}` : '';
  return `<${priority(level)}>${String(msg).replace(/\n/g, ' ')}${extra}\n`;
}
