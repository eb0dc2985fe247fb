/**
 * A strict reader of the text exposition /1.0/metrics answers with, written for the tests (it
 * shares nothing with the plugin's writer): HELP and TYPE before a family's samples, samples of a
 * family together, a `# EOF` line last. Throws on anything else.
 */
export interface ParsedSample {
  labels: Record<string, string>;
  value: number;
}

export interface ParsedFamily {
  help: string;
  type: string;
  samples: ParsedSample[];
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)$`);

function parseLabels(text: string, line: number): Record<string, string> {
  const labels: Record<string, string> = {};
  const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/y;
  let at = 0;
  while (at < text.length) {
    re.lastIndex = at;
    const m = re.exec(text);
    if (!m) throw new Error(`line ${line}: bad labels "${text}"`);
    if (m[1]! in labels) throw new Error(`line ${line}: label ${m[1]} twice`);
    labels[m[1]!] = m[2]!.replace(/\\n/g, '\n').replace(/\\(["\\])/g, '$1');
    at = re.lastIndex;
  }
  return labels;
}

function parseValue(text: string, line: number): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  if (!/^-?\d+(\.\d+)?(e[+-]\d+)?$/.test(text)) throw new Error(`line ${line}: bad value "${text}"`);
  return Number(text);
}

export function parseExposition(text: string): Map<string, ParsedFamily> {
  const families = new Map<string, ParsedFamily>();
  const lines = text.split('\n');
  if (lines.pop() !== '') throw new Error('the text does not end with a newline');
  if (lines.pop() !== '# EOF') throw new Error('the text does not end with # EOF');
  let current: string | undefined;
  lines.forEach((line, i) => {
    const n = i + 1;
    const help = /^# HELP (\S+) (.+)$/.exec(line);
    if (help) {
      if (families.has(help[1]!)) throw new Error(`line ${n}: family ${help[1]} appears twice`);
      families.set(help[1]!, { help: help[2]!, type: '', samples: [] });
      current = help[1];
      return;
    }
    const type = /^# TYPE (\S+) (counter|gauge|untyped|histogram|summary)$/.exec(line);
    if (type) {
      if (type[1] !== current || families.get(current)!.type) throw new Error(`line ${n}: TYPE not right after its HELP`);
      families.get(current)!.type = type[2]!;
      return;
    }
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`line ${n}: unreadable "${line}"`);
    if (m[1] !== current || !families.get(current)!.type) throw new Error(`line ${n}: sample of ${m[1]} outside its family`);
    families.get(current)!.samples.push({ labels: parseLabels(m[2] ?? '', n), value: parseValue(m[3]!, n) });
  });
  return families;
}
