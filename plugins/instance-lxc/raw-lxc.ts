/**
 * `raw.lxc`: liblxc config lines appended after the generated ones. The keys the reference
 * refuses are refused here (the daemon owns logging, ephemerality, process limits and the network
 * set-up); whether liblxc can parse the rest is liblxc's own call (raw-lxc-verdict.ts).
 */

export interface RawLxcLine {
  key: string;
  value: string;
}

export function parseRawLxc(text: string): RawLxcLine[] {
  const lines: RawLxcLine[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\r$/, '');
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq < 0) throw new Error(`Invalid raw.lxc line: ${trimmed}`);
    const key = line.slice(0, eq).trim();
    const value = line.slice(eq + 1).trim();
    checkKey(key);
    lines.push({ key, value });
  }
  return lines;
}

/** Keys compare without case, as the reference compares them; liblxc ignores lines not starting with `lxc.`. */
function checkKey(original: string): void {
  const key = original.toLowerCase();
  if (key === 'lxc.logfile' || key === 'lxc.log.file') throw new Error('Setting lxc.logfile is not allowed');
  if (key === 'lxc.syslog' || key === 'lxc.log.syslog') throw new Error('Setting lxc.log.syslog is not allowed');
  if (key === 'lxc.ephemeral') throw new Error('Setting lxc.ephemeral is not allowed');
  if (key.startsWith('lxc.prlimit.')) throw new Error('Process limits should be set via "limits.kernel.[limit name]" and not directly via "lxc.prlimit.[limit name]"');
  if (key.startsWith('lxc.net.')) {
    // Only addresses and gateways of an interface the daemon set up: lxc.net.<n>.ipv4.address...
    if (!/^lxc\.net\.\d+\.ipv[46]\.(address|gateway)$/.test(key)) throw new Error('Only interface-specific ipv4/ipv6 lxc.net. keys are allowed');
  }
}

export function checkRawLxc(text: string): void {
  parseRawLxc(text);
}

/** The lines as they go into the config file. */
export function rawLxcConfig(text: string): string[] {
  return parseRawLxc(text).map((l) => `${l.key} = ${l.value}`);
}
