/** Routes as data: a descriptor per path; the kernel turns descriptors into the HTTP pipeline. */
import type { ObjectSchema, Schema } from 'joi';
import type { WebSocket } from 'ws';
import type Logger from 'bunyan';
import type { ApiResponse } from './responses.js';
import type { Requestor } from './events.js';
import type { ErrorStatus } from './errors.js';

/**
 * Who may call: `trusted` (default) needs a trusted client, kept to its projects when restricted;
 * `admin` needs a trusted client that is not restricted to projects (server-wide changes);
 * `untrusted` lets anyone in (handlers see `req.trusted`); `metrics` also admits metrics-only certificates;
 * `filtered` needs a trusted client but lets a restricted one in whatever project it names (or all of them):
 * the handler answers it with only what its projects may see (`req.restrictedTo`), an empty list being an answer.
 */
export type AccessPolicy = 'trusted' | 'admin' | 'untrusted' | 'metrics' | 'filtered';

export interface ApiRequest {
  readonly id: string;
  readonly method: string;
  readonly path: string;
  /**
   * The path as the client sent it: the router drops a trailing slash (`/ui/` routes as `/ui`), which a
   * handler serving relative links needs to see. The same as `path` on websocket upgrades.
   */
  readonly sentPath: string;
  readonly params: Record<string, string>;
  /**
   * Parameters the matched path fixes by declaration rather than carries in the URL (the route's or
   * alias's `fixed`: `/1.0/containers/...` says `type: container`); empty when it fixes none.
   */
  readonly fixed: Readonly<Record<string, string>>;
  readonly query: Record<string, string>;
  readonly headers: Record<string, string | string[] | undefined>;
  body: any;
  /**
   * Project named by `?project=` (default `default`); on a feature-scoped route (featureScopedRoute),
   * the project whose resources of that kind it uses (the named one: `requestedProjectOf`).
   */
  readonly project: string;
  /** `?all-projects=true`. */
  readonly allProjects: boolean;
  /** Cluster member named by `?target=`. */
  readonly target: string | undefined;
  /** `?recursion=` (0, 1 or 2). */
  readonly recursion: 0 | 1 | 2;
  readonly trusted: boolean;
  readonly requestor: Requestor;
  /**
   * The cluster member that forwarded this request here on its caller's behalf (the caller fields are the
   * original client's); undefined for a request a client sent to this member itself.
   */
  readonly forwardedBy?: string;
  /** A restricted client's projects (it may use only these); undefined for unrestricted callers. */
  readonly restrictedTo?: readonly string[];
  /** PEM of the TLS client certificate, when the caller presented one. */
  readonly clientCertificate?: string;
  readonly log: Logger;
  /** The request body as a stream, only for verbs declared with `rawBody`. */
  readonly rawBody?: NodeJS.ReadableStream;
  /**
   * Throws 412 when the request carries an `If-Match` that names none of `content`'s ETags. The
   * kernel checks it before PUT and PATCH; a handler that applies the change later, inside its own
   * lock, checks again there against what it is about to change.
   */
  checkIfMatch(content: unknown): void;
  /** Aborted when the client goes away before its answer was sent: a handler that waits stops waiting. */
  readonly signal?: AbortSignal;
}

export type Handler = (req: ApiRequest) => ApiResponse | Promise<ApiResponse>;

/**
 * Query parameters the kernel implements that a verb honours, beyond `project` and `target` (which
 * every route accepts): `recursion` and `filter` on a listing (a `collection` answer) or an object
 * that recursion enlarges, `all-projects` where the handler lists across projects.
 */
export type QueryConvention = 'recursion' | 'filter' | 'all-projects';

/** The kinds of answer a verb gives (`sync` includes collections; `operation` is the async envelope). */
export type AnswerKind = 'sync' | 'operation' | 'raw';

export interface VerbSpec {
  handler: Handler;
  access?: AccessPolicy;
  /** joi shape of the query string (unknown parameters are allowed unless the schema says otherwise). */
  query?: ObjectSchema;
  /**
   * joi shape of the JSON body (see `objectBody`), checked strictly (no casting) before the handler
   * runs; a required shape refuses an empty body. Unknown top-level fields pass unless the schema forbids them.
   */
  body?: Schema;
  /** Stream the body instead of parsing JSON (uploads). */
  rawBody?: boolean;
  /** Largest accepted body in bytes (default 16 MiB for JSON). */
  maxBytes?: number;
  /** Lifecycle-free description used in logs and the docs. */
  description?: string;
  /** What this verb answers, for the API description (default `['sync']`); the kernel warns when a handler answers otherwise. */
  answers?: readonly AnswerKind[];
  /** The kernel's query conventions this verb honours (see `QueryConvention`), for the API description. */
  conventions?: readonly QueryConvention[];
  /**
   * Error statuses the handler itself answers (409 for a name in use, 404 for an unknown object…), for the
   * API description; the kernel adds the ones its pipeline answers (400, 403, 412, 500…).
   */
  errors?: readonly ErrorStatus[];
  /**
   * GET: the kernel may answer again with the bytes it answered last (same URL, same caller's reach)
   * while nothing the answer shows changed. It tracks what it can see: every document of the store and
   * every change the daemon makes (a request other than a read, a running operation). `true` says the
   * answer shows nothing else; a function returns a token for what else it shows (host state the
   * plugin watches): equal while that is unchanged, never an earlier value again (a counter), or
   * undefined when it cannot tell (the answer is then made every time). Leave it out when the answer reads anything not watched (a process's
   * status, a file another program writes).
   */
  reuse?: true | ((req: ApiRequest) => string | undefined);
}

export interface WebsocketSpec {
  access?: AccessPolicy;
  query?: ObjectSchema;
  /** Runs before the upgrade: throw an ApiError to refuse with the error envelope. */
  accept?: (req: ApiRequest) => void | Promise<void>;
  handler: (req: ApiRequest, socket: WebSocket) => void;
}

/** A further path a descriptor serves, with parameters that the path itself fixes. */
export interface RouteAlias {
  path: string;
  /** Handed to handlers as `req.fixed`: `/1.0/containers/{name}` fixes `{ type: 'container' }`. */
  fixed: Readonly<Record<string, string>>;
}

export interface RouteDescriptor {
  /** hapi path syntax: `/1.0/warnings/{uuid}`. */
  path: string;
  /** Parameters the main path fixes (see `RouteAlias`). */
  fixed?: Readonly<Record<string, string>>;
  /** Other paths served by the same handlers, each as is or with the parameters it fixes. */
  aliases?: (string | RouteAlias)[];
  /** Extension name this route belongs to (for docs and bookkeeping). */
  extension?: string;
  get?: VerbSpec;
  put?: VerbSpec;
  patch?: VerbSpec;
  post?: VerbSpec;
  delete?: VerbSpec;
  /** GET with `Upgrade: websocket`. */
  websocket?: WebsocketSpec;
  /**
   * The current user-modifiable content of the resource. With it, the kernel checks `If-Match`
   * on PUT and PATCH (412 on mismatch), and serves PATCH when only PUT is given, by merging
   * the body into this content (see `mergePatch`) and calling PUT with the result. PUT and PATCH
   * of one object are serialised by the kernel: a PATCH reads, merges and writes as one step.
   */
  current?: (req: ApiRequest) => Promise<unknown> | unknown;
  /**
   * In a cluster: the member that holds what this request names (an instance's `location`), or undefined
   * when any member can answer. The kernel forwards the request (websockets too) to that member when it is
   * another one, before access checks that need the object; without `locate`, a `?target=` naming another
   * member forwards. Never called on a standalone server.
   */
  locate?: (req: ApiRequest) => Promise<string | undefined> | string | undefined;
}
