/** hapi's router package ships no types; only what route-table.ts uses. */
declare module '@hapi/call' {
  interface Match<T> { route: T; params: Record<string, string> }
  class Router<T = unknown> {
    constructor(options?: { isCaseSensitive?: boolean });
    add(config: { method: string; path: string }, route: T): void;
    /** A Boom error when nothing matches (404) or a parameter does not decode (400). */
    route(method: string, path: string): Match<T> | (Error & { output?: { statusCode: number } });
  }
}
