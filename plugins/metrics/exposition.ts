/**
 * The text exposition the reference sends on /1.0/metrics: Prometheus text format (HELP and TYPE
 * before each family's samples, labels sorted by name) closed by an OpenMetrics `# EOF` line.
 */

export type FamilyType = 'counter' | 'gauge';

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  help: string;
  type: FamilyType;
  samples: Sample[];
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

/**
 * Numbers as Go's shortest `%g` writes them (exponent form outside 1e-4 <= |v| < 1e6, two exponent
 * digits at least): scrapers accept any float, and answers stay comparable with the reference's.
 */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (!Number.isFinite(v)) return v > 0 ? '+Inf' : '-Inf';
  if (v === 0) return '0';
  // Most figures are byte and packet counts: integers that print as they are below 1e6.
  if (Number.isInteger(v) && v > -1e6 && v < 1e6) return String(v);
  const exp = v.toExponential();
  const e = Number(exp.slice(exp.indexOf('e') + 1));
  if (e < -4 || e >= 6) return exp.replace(/e([+-])(\d+)$/, (_, sign: string, digits: string) => `e${sign}${digits.padStart(2, '0')}`);
  return String(v);
}

function labelText(labels: Record<string, string>): string {
  const names = Object.keys(labels).sort();
  if (!names.length) return '';
  return `{${names.map((n) => `${n}="${escapeLabel(labels[n]!)}"`).join(',')}}`;
}

/** Families without samples are left out, as the reference does. */
export function renderExposition(families: Family[]): string {
  const lines: string[] = [];
  // Samples sharing a labels object (an instance's memory figures, say) share its text: sorted and escaped once.
  const rendered = new Map<Record<string, string>, string>();
  const textOf = (labels: Record<string, string>) => {
    let text = rendered.get(labels);
    if (text === undefined) rendered.set(labels, (text = labelText(labels)));
    return text;
  };
  for (const family of families) {
    if (!family.samples.length) continue;
    lines.push(`# HELP ${family.name} ${escapeHelp(family.help)}`, `# TYPE ${family.name} ${family.type}`);
    for (const s of family.samples) lines.push(`${family.name}${textOf(s.labels)} ${formatValue(s.value)}`);
  }
  lines.push('# EOF', '');
  return lines.join('\n');
}
