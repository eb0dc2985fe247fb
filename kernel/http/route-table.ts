/**
 * Which pipeline route a request path is: hapi's own router (@hapi/call), used directly. hapi checks and
 * copies the options of every route it is given, which at ~150 paths was a quarter of a cold start
 * (issue 21); the kernel gives hapi one catch-all route and picks the route here, with the matching,
 * parameter decoding and conflict checks hapi would apply, for both lanes (fast-lane.ts).
 */
import Call from '@hapi/call';

export type RouteMatch<T> = { value: T; params: Record<string, string> } | 'not-found' | 'bad-path';

export class RouteTable<T> {
  // Case-sensitive, as the hapi servers of listeners.ts route.
  private readonly router = new Call.Router<{ value: T }>({ isCaseSensitive: true });
  private readonly added: string[] = [];

  /** Throws when `path` conflicts with one added before (as hapi's server.route would). */
  add(path: string, value: T): void {
    this.router.add({ method: '*', path }, { value });
    this.added.push(path);
  }

  get paths(): readonly string[] {
    return this.added;
  }

  /** `path` as hapi hands it over (escapes still in it): the route, with its parameters decoded. */
  match(path: string): RouteMatch<T> {
    const found = this.router.route('*', path);
    if (found instanceof Error) return found.output?.statusCode === 400 ? 'bad-path' : 'not-found';
    return { value: found.route.value, params: found.params };
  }
}
