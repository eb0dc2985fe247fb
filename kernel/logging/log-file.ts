/**
 * The daemon's log file, written synchronously (nothing is lost at exit) and reopened on demand
 * (SIGHUP after rotation). Never closed but at a reopen: the process's exit closes it.
 */
import { closeSync, openSync, writeSync } from 'node:fs';

export class LogFile {
  private fd: number;

  constructor(readonly path: string) {
    this.fd = LogFile.open(path);
  }

  private static open(file: string): number {
    return openSync(file, 'a', 0o600);
  }

  write(line: string): void {
    try {
      writeSync(this.fd, line);
    } catch {
      // A full disk or a removed mount must not take the daemon down with it; the next reopen may recover.
    }
  }

  /** Opens the path again: after logrotate moved the file away, new lines go to a new file. */
  reopen(): void {
    const next = LogFile.open(this.path);
    const previous = this.fd;
    this.fd = next;
    closeSync(previous);
  }
}
