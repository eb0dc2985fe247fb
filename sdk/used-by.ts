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
      const lists = (await Promise.all(providers.map((p) => p(project, name, memo)))).filter((list) => list.length > 0);
      // Answers already in order and without repeats (the instances, in their records' order) are merged as they
      // are: a set and a sort of every URL cost ~1 MB a request at 10,000 instances.
      if (lists.every(strictlyAscending)) return lists.reduce(mergeAscending, []);
      return [...new Set(lists.flat())].sort();
    },
  };
}

/** Whether each string sorts after the one before it, as `Array.prototype.sort` orders them. */
function strictlyAscending(list: readonly string[]): boolean {
  for (let i = 1; i < list.length; i++) if (!(list[i - 1]! < list[i]!)) return false;
  return true;
}

/** Two strictly ascending lists as one, each string once. */
function mergeAscending(a: readonly string[], b: readonly string[]): string[] {
  // A copy even then: the answer is the caller's to change, the provider's list may be kept by a memo.
  if (a.length === 0) return b.slice();
  const out: string[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i]! < b[j]!) out.push(a[i++]!);
    else if (b[j]! < a[i]!) out.push(b[j++]!);
    else {
      out.push(a[i++]!);
      j++;
    }
  }
  while (i < a.length) out.push(a[i++]!);
  while (j < b.length) out.push(b[j++]!);
  return out;
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
