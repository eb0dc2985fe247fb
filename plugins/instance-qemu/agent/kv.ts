/** Request and reply bodies: `key=value\0` entries, a key may repeat (the agent's guest/kv.c). */

export type KvFields = [string, string | number | undefined][];

export function encodeKv(fields: KvFields): Buffer {
  const parts: string[] = [];
  for (const [key, value] of fields) {
    if (value === undefined) continue;
    const text = String(value);
    if (text.includes('\0')) throw new RangeError(`"${key}" cannot hold a NUL byte`);
    parts.push(`${key}=${text}\0`);
  }
  return Buffer.from(parts.join(''), 'utf8');
}

export class KvReply {
  private readonly entries: [string, string][] = [];

  constructor(payload: Buffer) {
    for (const entry of payload.toString('utf8').split('\0')) {
      const eq = entry.indexOf('=');
      if (eq > 0) this.entries.push([entry.slice(0, eq), entry.slice(eq + 1)]);
    }
  }

  get(key: string): string | undefined {
    return this.entries.find(([k]) => k === key)?.[1];
  }

  all(key: string): string[] {
    return this.entries.filter(([k]) => k === key).map(([, v]) => v);
  }

  number(key: string): number {
    return Number(this.get(key) ?? 0);
  }
}
