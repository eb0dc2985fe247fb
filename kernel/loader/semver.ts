/** Just enough semver for manifest ranges: exact, `*`, `^`, `~`, `>=`, `<`, space-separated conjunctions. */

type Version = [number, number, number];

export function parseVersion(text: string): Version | undefined {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(text.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

const compare = (a: Version, b: Version): number => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

function satisfiesOne(v: Version, clause: string): boolean {
  if (clause === '*' || clause === '') return true;
  const m = /^(\^|~|>=|<=|>|<|=)?(.*)$/.exec(clause)!;
  const op = m[1] ?? '=';
  const base = parseVersion(m[2]!);
  if (!base) return false;
  const c = compare(v, base);
  switch (op) {
    case '^':
      return c >= 0 && (base[0] > 0 ? v[0] === base[0] : v[0] === 0 && v[1] === base[1]);
    case '~':
      return c >= 0 && v[0] === base[0] && v[1] === base[1];
    case '>=': return c >= 0;
    case '<=': return c <= 0;
    case '>': return c > 0;
    case '<': return c < 0;
    default: return c === 0;
  }
}

/** Whether `version` satisfies `range`; alternatives separated by `||`. */
export function satisfies(version: string, range: string): boolean {
  const v = parseVersion(version);
  if (!v) return false;
  return range.split('||').some((alt) => alt.trim().split(/\s+/).every((clause) => satisfiesOne(v, clause)));
}

export function isValidRange(range: string): boolean {
  return range.split('||').every((alt) => alt.trim().split(/\s+/).every((c) => c === '*' || c === '' || parseVersion(c.replace(/^(\^|~|>=|<=|>|<|=)/, '')) !== undefined));
}
