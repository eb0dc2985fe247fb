/** Architecture names an image may declare, and the canonical name the API shows for each. */

const CANONICAL: Record<string, string[]> = {
  i686: ['i386', 'i586', '386', 'x86', 'generic_32'],
  x86_64: ['amd64', 'generic_64'],
  armv6l: ['armv6', 'armv6el'],
  armv7l: ['armel', 'armhf', 'arm', 'armhfp', 'armv7', 'armv7a', 'armv7hl', 'armv7hnl', 'armv7nl', 'armv7hn', 'armv7n'],
  aarch64: ['arm64', 'arm64_v8'],
  ppc: ['powerpc'],
  ppc64: ['powerpc64'],
  ppc64le: ['ppc64el'],
  s390x: [],
  mips: [],
  mips64: [],
  riscv32: [],
  riscv64: [],
  loongarch64: [],
};

const BY_NAME = new Map<string, string>();
for (const [name, aliases] of Object.entries(CANONICAL)) {
  BY_NAME.set(name, name);
  for (const alias of aliases) BY_NAME.set(alias, name);
}

/** The canonical name, or undefined when the architecture is unknown. */
export function canonicalArchitecture(name: string): string | undefined {
  return BY_NAME.get(name.trim().toLowerCase());
}
