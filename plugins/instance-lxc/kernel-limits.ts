/**
 * `limits.kernel.<name>`: resource limits (prlimits) liblxc sets on the container's init, which
 * every process inside inherits. The names are the kernel's RLIMIT_* ones liblxc knows; a value is
 * `unlimited`, a number, or `soft:hard` of those. Checked when set, so that a typo is a 400 and not
 * a container that fails at its next start.
 */
export const KERNEL_LIMIT_PREFIX = 'limits.kernel.';

/** liblxc's `lxc.prlimit.<name>` names (RLIMIT_AS ... RLIMIT_STACK). */
export const KERNEL_LIMIT_NAMES = [
  'as', 'core', 'cpu', 'data', 'fsize', 'locks', 'memlock', 'msgqueue', 'nice', 'nofile', 'nproc',
  'rss', 'rtprio', 'rttime', 'sigpending', 'stack',
] as const;

/** setrlimit's largest finite value: one below RLIM_INFINITY. */
const MAX_FINITE = 2n ** 64n - 2n;

/** One side of a limit: a count, or undefined for unlimited. */
function parseBound(text: string, whole: string): bigint | undefined {
  // liblxc reads -1 as the largest value, which is RLIM_INFINITY; configs from the reference use it.
  if (text === 'unlimited' || text === '-1') return undefined;
  if (!/^\d+$/.test(text) || BigInt(text) > MAX_FINITE) {
    throw new Error(`"${whole}" is not a limit: use "unlimited", a number, or "soft:hard" of those`);
  }
  return BigInt(text);
}

/** Soft and hard limits of a value; a single value sets both, as liblxc reads it. */
export function parseKernelLimit(value: string): { soft?: bigint; hard?: bigint } {
  const parts = value.split(':');
  if (parts.length > 2) throw new Error(`"${value}" is not a limit: use "unlimited", a number, or "soft:hard" of those`);
  const soft = parseBound(parts[0]!, value);
  const hard = parts.length === 2 ? parseBound(parts[1]!, value) : soft;
  // The kernel refuses a soft limit above the hard one (EINVAL): the container would not start.
  if (hard !== undefined && (soft === undefined || soft > hard)) {
    throw new Error(`the soft limit of "${value}" is above its hard limit`);
  }
  return { soft, hard };
}

/** The limit's name from its key; throws for a name liblxc has no prlimit for. */
export function kernelLimitName(key: string): string {
  const name = key.slice(KERNEL_LIMIT_PREFIX.length);
  if (!(KERNEL_LIMIT_NAMES as readonly string[]).includes(name)) {
    throw new Error(`Unknown kernel limit "${name}" (one of ${KERNEL_LIMIT_NAMES.join(', ')})`);
  }
  return name;
}

/** Validator of a whole key and value (the config key registry only hands values to validators). */
export function checkKernelLimit(key: string, value: string): void {
  kernelLimitName(key);
  if (value !== '') parseKernelLimit(value);
}

/** `lxc.prlimit.*` lines of the set keys, in a stable order. */
export function prlimitLines(config: Record<string, string>): string[] {
  const lines: string[] = [];
  for (const name of KERNEL_LIMIT_NAMES) {
    const value = config[`${KERNEL_LIMIT_PREFIX}${name}`];
    if (!value) continue;
    const { soft, hard } = parseKernelLimit(value);
    const text = (b: bigint | undefined) => (b === undefined ? 'unlimited' : String(b));
    lines.push(`lxc.prlimit.${name} = ${text(soft)}:${text(hard)}`);
  }
  return lines;
}
