/** Host processes whose command line contains a fragment: what a test checks was left running. */
import { readdirSync, readFileSync } from 'node:fs';

export interface HostProcessEntry {
  pid: number;
  /** Arguments joined by spaces. */
  cmdline: string;
}

export function processesWith(fragment: string): HostProcessEntry[] {
  const found: HostProcessEntry[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
    } catch {
      continue; // exited while we looked
    }
    if (cmdline.includes(fragment)) found.push({ pid: Number(entry), cmdline });
  }
  return found;
}
