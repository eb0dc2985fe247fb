/** `used_by` lists are assembled from providers that other plugins register with the owner. */

/**
 * Work shared across the `collect` calls of one listing: a provider keeps here what it would
 * otherwise fetch again for every name (the instance list, say). Made per request, never kept.
 */
export class UsedByMemo {
  private readonly values = new Map<string, Promise<unknown>>();

  get<T>(key: string, compute: () => Promise<T> | T): Promise<T> {
    let value = this.values.get(key) as Promise<T> | undefined;
    if (!value) {
      value = Promise.resolve().then(compute);
      this.values.set(key, value);
    }
    return value;
  }
}

/** Answers the URLs of what uses the named resource (`project` is the resource's project). */
export type UsedByProvider = (project: string, name: string, memo: UsedByMemo) => Promise<string[]> | string[];

export interface UsedByRegistry {
  add(provider: UsedByProvider): void;
  /** Every provider's answers, sorted and without duplicates; pass one memo for all names of a listing. */
  collect(project: string, name: string, memo?: UsedByMemo): Promise<string[]>;
}

export function createUsedByRegistry(): UsedByRegistry {
  const providers: UsedByProvider[] = [];
  return {
    add(provider) {
      providers.push(provider);
    },
    async collect(project, name, memo = new UsedByMemo()) {
      const lists = await Promise.all(providers.map((p) => p(project, name, memo)));
      return [...new Set(lists.flat())].sort();
    },
  };
}
/** A resource URL as used_by lists carry it: `?project=` only outside the default project. */
export function resourceUrl(path: string, project: string): string {
  return project === 'default' ? path : `${path}?project=${encodeURIComponent(project)}`;
}

/** The project a used_by URL points into (`default` when it names none). */
export function projectOfUrl(url: string): string {
  const query = url.indexOf('?');
  return (query < 0 ? undefined : new URLSearchParams(url.slice(query + 1)).get('project')) ?? 'default';
}

/** What of `urls` a caller restricted to `projects` may see (all of it for an unrestricted caller). */
export function visibleUrls(urls: string[], projects: readonly string[] | undefined): string[] {
  return projects ? urls.filter((url) => projects.includes(projectOfUrl(url))) : urls;
}
