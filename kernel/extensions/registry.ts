/** Which api_extensions names this build advertises: the enabled claims, in catalog order. */
import { catalogPosition, isCatalogName } from '../../sdk/index.js';

export class ExtensionRegistry {
  private readonly claimed = new Map<string, string>();
  private ordered: string[] = [];

  /** Record claims; throws naming every unknown or doubly claimed name. */
  claim(owner: string, names: readonly string[]): void {
    const problems = checkClaims(new Map(this.claimed), owner, names);
    if (problems.length) throw new Error(problems.join('\n'));
    for (const name of names) this.claimed.set(name, owner);
    this.ordered = [...this.claimed.keys()].sort((a, b) => catalogPosition(a) - catalogPosition(b));
  }

  has(name: string): boolean {
    return this.claimed.has(name);
  }

  list(): readonly string[] {
    return this.ordered;
  }
}

/** Problems with `owner` claiming `names` given earlier claims (name -> owner); updates `earlier`. */
export function checkClaims(earlier: Map<string, string>, owner: string, names: readonly string[]): string[] {
  const problems: string[] = [];
  for (const name of names) {
    if (!isCatalogName(name)) problems.push(`${owner} claims unknown api extension "${name}" (not in the sdk catalog)`);
    const other = earlier.get(name);
    if (other !== undefined) problems.push(`api extension "${name}" is claimed by both ${other} and ${owner}`);
    earlier.set(name, owner);
  }
  return problems;
}
