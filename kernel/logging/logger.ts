/** bunyan logging: JSON to a file in the data dir and to stdout, plus a feed for `logging` events. */
import bunyan from 'bunyan';
import path from 'node:path';

export interface LogRecord {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export interface LoggerOptions {
  dataDir?: string;
  stdout?: boolean;
  level?: bunyan.LogLevel;
  /** Receives every record at or above `level` (for the `logging` event stream). */
  sink?: (record: LogRecord) => void;
}

export function createLogger(opts: LoggerOptions): bunyan {
  const level = opts.level ?? 'info';
  const streams: bunyan.Stream[] = [];
  if (opts.stdout) streams.push({ level, stream: process.stdout });
  if (opts.dataDir) streams.push({ level: 'debug', path: path.join(opts.dataDir, 'corral.log') });
  if (opts.sink) {
    const sink = opts.sink;
    streams.push({ level: 'debug', type: 'raw', stream: { write: (rec: unknown) => sink(rec as LogRecord) } as NodeJS.WritableStream });
  }
  return bunyan.createLogger({ name: 'corral', streams, serializers: bunyan.stdSerializers });
}

/** bunyan level number to the names used in `logging` events. */
export function levelName(level: number): string {
  if (level >= bunyan.ERROR) return 'error';
  if (level >= bunyan.WARN) return 'warning';
  if (level >= bunyan.INFO) return 'info';
  return 'debug';
}
