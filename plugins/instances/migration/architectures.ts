/** The migration header carries architectures by the reference's numeric ids, not by name. */
const IDS: Record<string, number> = {
  i686: 1, x86_64: 2, armv7l: 3, aarch64: 4, ppc: 5, ppc64: 6, ppc64le: 7, s390x: 8, mips: 9, mips64: 10, riscv32: 11, riscv64: 12,
};

export const architectureId = (name: string): number => IDS[name] ?? 0;

export function architectureName(id: number): string {
  const found = Object.entries(IDS).find(([, n]) => n === id);
  if (!found) throw new Error(`The migration header names an unknown architecture id ${id}`);
  return found[0];
}
