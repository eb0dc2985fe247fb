/** Token lifetimes as the reference writes them: a number and a unit, `30M`, `3H`, `1d`; several may follow each other (`1H30M`). */

const UNIT_MS: Record<string, number> = {
  S: 1000,
  M: 60_000,
  H: 3_600_000,
  d: 86_400_000,
  w: 7 * 86_400_000,
  m: 30 * 86_400_000,
  y: 365 * 86_400_000,
};

/** Milliseconds; throws a plain Error naming what is wrong. */
export function parseExpiry(text: string): number {
  const parts = [...text.matchAll(/(\d+)([SMHdwmy])/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) {
    throw new Error(`Invalid expiry "${text}": a number and a unit (S, M, H, d, w, m, y), e.g. 3H`);
  }
  const ms = parts.reduce((sum, p) => sum + Number(p[1]) * UNIT_MS[p[2]!]!, 0);
  if (ms <= 0) throw new Error(`Invalid expiry "${text}": it must be longer than zero`);
  return ms;
}
