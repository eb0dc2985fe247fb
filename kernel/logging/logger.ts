/**
 * bunyan logging: JSON lines to `corral.log` in the data dir and to stdout (journal lines under
 * systemd), at a level that can change while the daemon runs, plus a feed for `logging` events.
 */
import bunyan from 'bunyan';
import path from 'node:path';
import { LogFile } from './log-file.js';
import { journalLine, stdoutIsJournal } from './journal.js';

export interface LogRecord {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;

export interface LoggerOptions {
  dataDir?: string;
  stdout?: boolean;
  level?: bunyan.LogLevel;
  /** Receives every record, whatever the level (for the `logging` event stream). */
  sink?: (record: LogRecord) => void;
}

const json = (value: unknown) => JSON.stringify(value, bunyan.safeCycles());

/**
 * Where records go and at what level. bunyan copies its streams into every child logger, so the
 * level lives here, in the one object they all share, and changes reach the children too.
 */
export class LogOutputs {
  private threshold: number;
  private readonly file: LogFile | undefined;
  private readonly stdout: ((record: LogRecord) => void) | undefined;

  constructor(opts: LoggerOptions) {
    this.threshold = bunyan.resolveLevel(opts.level ?? 'info');
    this.file = opts.dataDir ? new LogFile(path.join(opts.dataDir, 'corral.log')) : undefined;
    if (opts.stdout) {
      this.stdout = stdoutIsJournal()
        ? (record) => process.stdout.write(journalLine(record, json))
        : (record) => process.stdout.write(`${json(record)}\n`);
    }
  }

  setLevel(level: bunyan.LogLevel): void {
    this.threshold = bunyan.resolveLevel(level);
  }

  /** After the file was moved away (log rotation): new lines go to a new file at the same path. */
  reopen(): void {
    this.file?.reopen();
  }

  write(record: LogRecord): void {
    if (record.level < this.threshold) return;
    if (this.file) this.file.write(`${json(record)}\n`);
    this.stdout?.(record);
  }
}

export function createLogger(opts: LoggerOptions): { log: bunyan; outputs: LogOutputs } {
  const outputs = new LogOutputs(opts);
  const raw = (write: (record: LogRecord) => void) => ({ level: 'debug' as const, type: 'raw', stream: { write } as unknown as NodeJS.WritableStream });
  const streams: bunyan.Stream[] = [raw((record) => outputs.write(record))];
  if (opts.sink) streams.push(raw(opts.sink));
  return { log: bunyan.createLogger({ name: 'corral', streams, serializers: bunyan.stdSerializers }), outputs };
}

/** bunyan level number to the names used in `logging` events. */
export function levelName(level: number): string {
  if (level >= bunyan.ERROR) return 'error';
  if (level >= bunyan.WARN) return 'warning';
  if (level >= bunyan.INFO) return 'info';
  return 'debug';
}
