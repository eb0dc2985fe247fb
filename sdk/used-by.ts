/** `used_by` lists are assembled from providers that other plugins register with the owner. */

/** Answers the URLs of what uses the named resource (`project` is the resource's project). */
export type UsedByProvider = (project: string, name: string) => Promise<string[]> | string[];

export interface UsedByRegistry {
  add(provider: UsedByProvider): void;
  /** Every provider's answers, sorted and without duplicates. */
  collect(project: string, name: string): Promise<string[]>;
}

export function createUsedByRegistry(): UsedByRegistry {
  const providers: UsedByProvider[] = [];
  return {
    add(provider) {
      providers.push(provider);
    },
    async collect(project, name) {
      const lists = await Promise.all(providers.map((p) => p(project, name)));
      return [...new Set(lists.flat())].sort();
    },
  };
}

/** A resource URL as used_by lists carry it: `?project=` only outside the default project. */
export function resourceUrl(path: string, project: string): string {
  return project === 'default' ? path : `${path}?project=${encodeURIComponent(project)}`;
}
