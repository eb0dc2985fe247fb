/**
 * Routes as data, pipeline in the kernel. Descriptors become hapi routes whose one handler runs the
 * shared steps: access policy, query conventions (recursion, project, target, filter), If-Match,
 * body shape, the plugin's handler, and rendering of its response into the envelopes.
 */
import type Hapi from '@hapi/hapi';
import type { Request } from '@hapi/hapi';
import type { Readable } from 'node:stream';
import { validateHeaderName, validateHeaderValue, type IncomingMessage, type ServerResponse } from 'node:http';
import type Logger from 'bunyan';
import {
  KeyedLock, badRequest, checkShape, forbidden, isApiError, mergePatch, notFound, objectBody, parseJsonText,
  type AnswerKind, type ApiResponse, type ClusterMemberInfo, type ErrorStatus, type RouteDescriptor, type VerbSpec, type WebsocketSpec,
} from '../../sdk/index.js';
import { errorStatuses } from '../openapi/error-answers.js';
import { parseFilter, compileFilter, FilterSyntaxError, type CompiledFilter } from '../filter/index.js';
import { KernelRequest, flattenQuery, type Caller } from './api-request.js';
import { asyncBody, encodeItem, encodeItemToKeep, etagOf, syncBody, syncGroupedBody, syncListParts } from './envelope.js';
import { partsLength, sliceStream } from './list-stream.js';
import { ABANDONED, JSON_TYPE, jsonAnswer, toHapi, type Answer } from './answer.js';
import { installFastLane, type Incoming } from './fast-lane.js';
import { RouteTable } from './route-table.js';
import { answerHeaders } from './listeners.js';
import { checkDeclaredLength, readBody } from './request-body.js';
import { servedPaths } from './route-paths.js';
import { READ_REVISION_HEADER, stripPeerHeaders } from '../cluster/peer-headers.js';
import { adoptPeerRevision, noteNews, withReadScope } from '../store/read-scope.js';
import type { ChangeActivity } from '../change-activity.js';
import { AnswerReuse, reach, type ReuseSlot } from './answer-reuse.js';

const VERBS = ['get', 'put', 'patch', 'post', 'delete'] as const;
type Verb = (typeof VERBS)[number];

const DEFAULT_MAX_BYTES = 16 * 1024 * 1024;
/**
 * hapi hands bodies over unread: limits, reading and draining are the kernel's, so none of them closes a
 * connection early. The Content-Type is not hapi's to judge either (a malformed one is no refusal).
 */
const UNREAD_PAYLOAD = { parse: false, output: 'stream', maxBytes: Number.MAX_SAFE_INTEGER, override: 'application/octet-stream', failAction: 'error' } as const;
const PROJECT_NAME = /^[^\s/\\?&#%*'"<>|]{1,63}$/;
/** What a verb answers when its descriptor does not say (VerbSpec.answers). */
const DEFAULT_ANSWERS: readonly AnswerKind[] = ['sync'];
/**
 * Listings this long or longer keep their last body (listAnswer), up to these bounds. A body is a copy of
 * its fragments, which are kept anyway: with 10,000 instances the two listings' bodies held 28 MiB of
 * the daemon's memory for ~5 ms of a 40 ms listing, so bodies that large are sent in slices instead.
 */
const LIST_BODY_MIN_ITEMS = 64;
const LIST_BODY_MAX_ENTRIES = 16;
const LIST_BODY_MAX_BYTES = 8 * 1024 * 1024;
/** A PATCH body is a JSON object; its fields are checked once merged, against the PUT shape. */
const PATCH_BODY = objectBody();

export type Authenticate = (raw: IncomingMessage, access: string) => Promise<Caller>;
/** How a listener's callers are known: each by `Authenticate`, or all the same one (the unix socket). */
export type Callers = Authenticate | { readonly every: Caller };

export interface PipelineOptions {
  log: Logger;
  /** Runs the kernel's `checkProject` hook (no-op when nobody tapped it). */
  checkProject: (req: KernelRequest) => Promise<void>;
  /** Whether a plugin checks `?project=` names (an unknown one is then a 404 on every route). */
  projectsChecked: () => boolean;
  /** Whether the build can form a cluster (the API description lists 503 on every route). */
  clusterable?: () => boolean;
  /** Whether `?target=` can name anything (clustering tapped in). */
  clustered: () => boolean;
  serverName: () => string;
  /** Forwarding to other cluster members (kernel/cluster); absent: every request is answered here. */
  forwarding?: Forwarding;
  /** Plain reads go around hapi (fast-lane.ts) unless this is false. */
  fastLane?: boolean;
  /** The daemon's own changes: every request but a read is one (the operations it starts count themselves). */
  activity?: ChangeActivity;
  /** The store's revision, undefined when its reads are not answered here (answers are then never reused). */
  storeRevision?: () => number | undefined;
}

/** What the pipeline asks of the cluster layer before a handler runs or a websocket is accepted. */
export interface Forwarding {
  /** Whether this server is clustered now (nothing else is asked when it is not). */
  active(): boolean;
  /** The member that must answer `req` when it is another one (`locate`, else `?target=`). */
  target(locate: RouteDescriptor['locate'], req: KernelRequest): Promise<ClusterMemberInfo | undefined>;
  /** Proxy the request to `member` and stream its answer to `res` (resolves once the answer has begun). */
  proxy(member: ClusterMemberInfo, raw: IncomingMessage, body: NodeJS.ReadableStream, res: ServerResponse, caller: Caller): Promise<void>;
  /** Open the websocket the request asks for on `member`, for `caller`. */
  openWebsocket(member: ClusterMemberInfo, raw: IncomingMessage, caller: Caller): Promise<import('ws').WebSocket>;
}

interface WebsocketRoute {
  path: string;
  locate: RouteDescriptor['locate'];
  fixed: Readonly<Record<string, string>>;
  pattern: RegExp;
  names: string[];
  spec: WebsocketSpec;
}

/** What install() keeps for each served path. */
interface InstalledPath {
  route: RouteDescriptor;
  fixed: Readonly<Record<string, string>>;
  specs: Map<Verb, VerbSpec>;
  /** How the fast lane answers a plain read of this path; absent when the path must go through hapi. */
  fast?: (incoming: Incoming) => Promise<Answer | typeof ABANDONED>;
}

let requestCounter = 0;
const nextRequestId = () => (++requestCounter).toString(36);

export class RoutePipeline {
  private readonly routes: { owner: string; route: RouteDescriptor }[] = [];
  private readonly owners = new Map<string, string>();
  readonly websockets: WebsocketRoute[] = [];
  /** Serialised sync bodies and ETags, by the identity of the object a handler returned (cached answers pay once). */
  private readonly bodyCache = new WeakMap<object, string>();
  private readonly fragmentCache = new WeakMap<object, Buffer>();
  private readonly etagCache = new WeakMap<object, string>();
  /** The fragments made of kept views (a fresh one is never the same object twice). */
  private readonly keptFragments = new WeakSet<Buffer>();
  /** Large listings' last bodies, by what they list (listBody). */
  private readonly listBodies = new Map<string, { fragments: Buffer[]; body: Buffer }>();
  private listBodyBytes = 0;
  /** PUT and PATCH of one object, one at a time: a PATCH's read, merge and write see no other write between them. */
  private readonly writes = new KeyedLock();
  /** Set once the daemon has booted: the routes are final (the API description is written from them). */
  private isSealed = false;
  /** Routes whose handler answered a kind or an error status its descriptor does not declare (warned once each). */
  private readonly misdeclared = new Set<string>();

  /** Each server's routes, by path (install). */
  private readonly tables = new WeakMap<Hapi.Server, RouteTable<InstalledPath>>();
  /** Answers of reads that declare `reuse`, kept while nothing they show changed. */
  private readonly answers: AnswerReuse | undefined;

  constructor(private readonly opts: PipelineOptions) {
    const { activity, storeRevision } = opts;
    if (activity && storeRevision) {
      this.answers = new AnswerReuse(() => {
        const revision = storeRevision();
        const changes = activity.stamp();
        return revision === undefined || changes === undefined ? undefined : `${revision}.${changes}`;
      });
    }
  }

  /** The cluster layer, when this server is clustered now (websocket upgrades ask it too). */
  get forwarding(): Forwarding | undefined {
    return this.opts.forwarding?.active() ? this.opts.forwarding : undefined;
  }

  add(owner: string, route: RouteDescriptor): void {
    if (this.isSealed) throw new Error(`${owner}: route ${route.path} added after boot (routes are sealed once the daemon is up)`);
    for (const { path, fixed } of servedPaths(route)) {
      if (!path.startsWith('/')) throw new Error(`${owner}: route path "${path}" must start with /`);
      const key = path.replace(/\{[^}]+\}/g, '{}');
      const other = this.owners.get(key);
      if (other) throw new Error(`route ${path} is registered by both ${other} and ${owner}`);
      this.owners.set(key, owner);
      if (route.websocket) this.websockets.push(compileWebsocketRoute(path, fixed, route.websocket, route.locate));
    }
    this.routes.push({ owner, route });
  }

  /** No route is added after this (called when the daemon has booted). */
  seal(): void {
    this.isSealed = true;
  }

  get sealed(): boolean {
    return this.isSealed;
  }

  /** The routes as registered, with the plugin that added each (for the generated route table and API description). */
  registered(): readonly { readonly owner: string; readonly route: Readonly<RouteDescriptor> }[] {
    return this.routes;
  }

  /**
   * Put every route on a hapi server (one per listener), authenticating callers with `callers`.
   * `only`: the paths this server serves (a listener for part of the API); all when undefined.
   */
  install(server: Hapi.Server, callers: Callers, only?: ReadonlySet<string>): void {
    const table = new RouteTable<InstalledPath>();
    const every = typeof callers === 'function' ? undefined : callers.every;
    const authenticate: Authenticate = typeof callers === 'function' ? callers : async () => every!;
    // Where every caller is the same, a read kept by URL is answered before its route is even looked up:
    // the URL names the route, on any listener serving every path.
    const answers = this.answers;
    const sameReach = every && answers && !only ? reach(every) : undefined;
    const kept = sameReach === undefined ? undefined : (url: string) => answers!.taken(sameReach, url);
    for (const { route, path, fixed, specs } of this.servedPaths()) {
      if (only && !only.has(path)) continue;
      const get = specs.get('get');
      // Plain reads may take the fast lane; a raw body or a websocket needs hapi's request.
      const fast = get && !get.rawBody && !route.websocket ? (incoming: Incoming) => this.serve(incoming, route, fixed, 'get', get, authenticate) : undefined;
      table.add(path, { route, fixed, specs, fast });
    }
    this.tables.set(server, table);
    // One hapi route for them all (route-table.ts): the pipeline picks the route and then the verb.
    server.route({ method: '*', path: '/{any*}', options: { payload: UNREAD_PAYLOAD }, handler: async (request, h) => {
      const match = table.match(request.path);
      if (match === 'bad-path') throw badRequest('Invalid request path');
      if (match === 'not-found') throw notFound();
      const { route, fixed, specs } = match.value;
      // HEAD is a GET without its body, as hapi serves it for GET routes. Bodies are JSON whatever Content-Type
      // a client sends (curl -d says form data), so the kernel reads and parses them itself, within the
      // route's limit (request-body.ts); hapi reads none for GET and HEAD.
      const verb = (request.method === 'head' ? 'get' : request.method) as Verb;
      const spec = specs.get(verb);
      if (spec) {
        const answer = await this.serve(incomingOf(request, match.params), route, fixed, verb, spec, authenticate);
        return answer === ABANDONED ? h.abandon : toHapi(h, answer);
      }
      // Browsers ask before cross-origin calls; the answer carries no body.
      if (request.method === 'options') return h.response().code(200);
      if (request.method === 'get' && route.websocket) throw badRequest('This endpoint needs a websocket upgrade');
      throw badRequest(`Method ${request.method.toUpperCase()} is not supported on ${request.path}`);
    } });
    if (this.opts.fastLane !== false) {
      installFastLane(server, (path) => {
        const match = table.match(path);
        return typeof match === 'object' && match.value.fast ? { serve: match.value.fast, params: match.params } : undefined;
      }, this.opts.log, answerHeaders(server), kept);
    }
  }

  /** The route paths install() put on `server` (hapi's path syntax). */
  installedPaths(server: Hapi.Server): readonly string[] {
    return this.tables.get(server)?.paths ?? [];
  }

  /** Every `METHOD path` (hapi's path syntax) that install() serves, websockets aside. */
  servedMethods(): string[] {
    return this.servedPaths().flatMap(({ path, specs }) => [...specs.keys()].map((verb) => `${verb.toUpperCase()} ${path}`));
  }

  /** Each path a route serves, with the verbs served there. */
  private servedPaths(): { route: RouteDescriptor; path: string; fixed: Readonly<Record<string, string>>; specs: Map<Verb, VerbSpec> }[] {
    return this.routes.flatMap(({ route }) => {
      const specs = new Map<Verb, VerbSpec>();
      for (const verb of VERBS) {
        const spec = this.verbSpec(route, verb);
        if (spec) specs.set(verb, spec);
      }
      return servedPaths(route).map(({ path, fixed }) => ({ route, path, fixed, specs }));
    });
  }

  /** PATCH comes for free from PUT and `current`. */
  private verbSpec(route: RouteDescriptor, verb: Verb): VerbSpec | undefined {
    if (route[verb]) return route[verb];
    if (verb !== 'patch' || !route.put || !route.current) return undefined;
    const put = route.put;
    const current = route.current;
    return {
      ...put,
      // The PUT shape applies to the merged result, not to the partial body (its defaults would overwrite fields not sent).
      body: PATCH_BODY,
      // Runs inside the object's write lock (see `serve`), so `current` is what the PUT replaces.
      handler: async (req) => {
        const merged = mergePatch((await current(req)) as Record<string, unknown>, req.body);
        req.body = put.body ? checkShape(put.body, merged, 'request body') : merged;
        return put.handler(req);
      },
    };
  }

  private async serve(
    incoming: Incoming, route: RouteDescriptor, fixed: Readonly<Record<string, string>>, verb: Verb, spec: VerbSpec, authenticate: Authenticate,
  ): Promise<Answer | typeof ABANDONED> {
    // A change (anything but a read) keeps kept answers from being taken until it ended.
    const ended = verb === 'get' ? undefined : this.opts.activity?.begin();
    try {
      const answer = () => this.answer(incoming, route, fixed, verb, spec, authenticate);
      if (!this.forwarding) return await answer();
      // In a cluster a request's reads share one freshness check of the store's copy; the request itself
      // is news to the requests already running, whose next reads check again (kernel/store/read-scope.ts).
      noteNews();
      return await withReadScope(answer);
    } catch (err) {
      if (isApiError(err)) this.checkDeclaredError(route, verb, spec, err.status);
      throw err;
    } finally {
      ended?.();
    }
  }

  private async answer(
    incoming: Incoming, route: RouteDescriptor, fixed: Readonly<Record<string, string>>, verb: Verb, spec: VerbSpec, authenticate: Authenticate,
  ): Promise<Answer | typeof ABANDONED> {
    const access = spec.access ?? 'trusted';
    const { raw, res } = incoming;
    const caller = await authenticate(raw, access);
    if (!caller.peer) stripPeerHeaders(raw.headers);
    else adoptPeerRevision(raw.headers[READ_REVISION_HEADER]);
    const build = (body: unknown) => this.buildRequest(incoming.method, incoming.path, incoming.params, fixed, incoming.query,
      raw.headers, caller, body, spec.rawBody ? incoming.payload : undefined, res);
    const forwarding = this.forwarding;
    // In a cluster the caller's access is checked here, then the request may go, body unread, to the member that answers it.
    const early = forwarding ? build(undefined) : undefined;
    if (early) {
      checkAccess(caller, access, early.project, early.allProjects);
      await this.checkProject(early);
      const member = await forwarding!.target(route.locate, early);
      if (member) {
        await forwarding!.proxy(member, raw, incoming.payload ?? raw, res, caller);
        return ABANDONED;
      }
    }
    const limit = spec.maxBytes ?? DEFAULT_MAX_BYTES;
    if (spec.rawBody) checkDeclaredLength(raw.headers, limit);
    const payload = spec.rawBody || verb === 'get' ? undefined : await readBody(incoming.payload as Readable, raw.headers, limit);
    const body = spec.rawBody ? undefined : parseJsonBody(payload);
    let req: KernelRequest;
    if (early) {
      req = early;
      req.body = body;
    } else {
      req = build(body);
      checkAccess(caller, access, req.project, req.allProjects);
      await this.checkProject(req);
    }

    // The same URL for a caller of the same reach passed the checks below before, with the same result.
    const reuse = verb === 'get' && spec.reuse && this.answers ? this.answers.lookup(spec.reuse, req, caller, raw.url ?? incoming.path) : undefined;
    if (reuse && !isReuseSlot(reuse)) return reuse;

    if (spec.query) checkShape(spec.query, req.query, 'query', true);
    if (spec.body && !spec.rawBody) req.body = checkShape(spec.body, req.body, 'request body');

    const filter = parseFilterParam(req.query.filter);
    const response = (verb === 'put' || verb === 'patch') && route.current
      ? await this.writes.run(writeKey(route, req), async () => {
        if (req.headers['if-match']) req.checkIfMatch(await route.current!(req));
        return spec.handler(req);
      })
      : await spec.handler(req);
    this.checkDeclared(route, verb, spec, response);
    const answer = await this.render(req, response, filter);
    if (reuse) this.answers!.keep(reuse, req, answer, () => req.detached());
    return answer;
  }

  /**
   * The API description says what each verb answers from its descriptor (`answers`, `conventions`): an
   * answer of another kind means the description is wrong for that route. Logged once per route and verb.
   */
  private checkDeclared(route: RouteDescriptor, verb: Verb, spec: VerbSpec, response: ApiResponse): void {
    const kind = response.kind === 'collection' ? 'sync' : response.kind;
    const declared = (spec.answers ?? DEFAULT_ANSWERS).includes(kind) && (response.kind !== 'collection' || (spec.conventions?.includes('filter') ?? false));
    if (declared) return;
    const key = `${verb} ${route.path}`;
    if (this.misdeclared.has(key)) return;
    this.misdeclared.add(key);
    this.opts.log.warn({ route: route.path, verb, answered: response.kind, declared: spec.answers ?? DEFAULT_ANSWERS, conventions: spec.conventions ?? [] },
      'route answered a kind its descriptor does not declare (the API description is wrong for it)');
  }

  /** The same for error statuses: one the API description does not list for the method is logged once. */
  private checkDeclaredError(route: RouteDescriptor, verb: Verb, spec: VerbSpec, status: number): void {
    const listed = errorStatuses({
      verb, access: spec.access ?? 'trusted', spec, namesObject: route.path.includes('{'), checksIfMatch: route.current !== undefined,
    }, { projectsChecked: this.opts.projectsChecked(), clusterable: this.opts.clusterable?.() });
    if (listed.includes(status as ErrorStatus)) return;
    const key = `${verb} ${route.path} ${status}`;
    if (this.misdeclared.has(key)) return;
    this.misdeclared.add(key);
    this.opts.log.warn({ route: route.path, verb, status, listed },
      'route answered an error status its descriptor does not declare (the API description is wrong for it)');
  }

  /** Descriptor mismatches seen so far (`verb path`, with the status for errors), for tests. */
  misdeclaredRoutes(): string[] {
    return [...this.misdeclared];
  }

  /** The `checkProject` hook for a request's project (`default` always exists). */
  async checkProject(req: KernelRequest): Promise<void> {
    if (req.project !== 'default') await this.opts.checkProject(req);
  }

  buildRequest(
    method: string, path: string, params: Record<string, string>, fixed: Readonly<Record<string, string>>, rawQuery: Record<string, unknown>,
    headers: Record<string, string | string[] | undefined>, caller: Caller, body: unknown, rawBody?: NodeJS.ReadableStream,
    response?: ServerResponse,
  ): KernelRequest {
    const query = flattenQuery(rawQuery);
    const project = query.project || 'default';
    if (!PROJECT_NAME.test(project)) throw badRequest(`Invalid project name "${project}"`);
    const target = query.target || undefined;
    if (target !== undefined && !this.opts.clustered() && target !== this.opts.serverName()) throw badRequest('This server is not clustered');
    return new KernelRequest(
      nextRequestId(),
      method.toUpperCase(),
      path,
      params,
      fixed,
      query,
      headers,
      body,
      project,
      query['all-projects'] === 'true' || query['all-projects'] === '1',
      target,
      parseRecursion(query.recursion),
      caller,
      this.opts.log,
      rawBody,
      response,
    );
  }

  private async render(req: KernelRequest, response: ApiResponse, filter: CompiledFilter | undefined): Promise<Answer> {
    switch (response.kind) {
      case 'sync': {
        const headers: Record<string, string> = {};
        if (response.etag !== undefined) headers.ETag = `"${this.etag(response.etag)}"`;
        if (response.location) headers.Location = response.location;
        Object.assign(headers, checkedHeaders(response.headers));
        return jsonAnswer(this.serialise(response.metadata), 200, headers);
      }
      case 'operation': {
        const view = response.operation.view();
        return jsonAnswer(asyncBody(view), 202, { Location: response.operation.url });
      }
      case 'collection': {
        const level = req.recursion === 0 ? 1 : req.recursion;
        let items = response.items;
        let objects: unknown[] | undefined;
        if (filter) {
          const rendered = await settled(items.map((item) => response.render(item, level)));
          const keep = await filterCooperatively(rendered, filter);
          items = items.filter((_, i) => keep[i]);
          objects = rendered.filter((_, i) => keep[i]);
        }
        const metadata = req.recursion === 0
          ? items.map((item) => response.url(item))
          : objects ?? (await settled(items.map((item) => response.render(item, level))));
        return req.recursion === 0 ? jsonAnswer(syncBody(metadata)) : this.listAnswer(req, metadata.map((item) => this.fragment(item)));
      }
      case 'raw':
        return { status: response.status ?? 200, type: response.contentType, headers: checkedHeaders(response.headers), body: response.body };
    }
  }

  /**
   * One item of a listing as JSON. A frozen item is a view its plugin hands back unchanged while what
   * it shows is unchanged (instances at recursion=1): serialised once, then reused while it lives.
   */
  private fragment(item: unknown): Buffer {
    if (typeof item !== 'object' || item === null || !Object.isFrozen(item)) return encodeItem(item);
    let bytes = this.fragmentCache.get(item);
    if (bytes === undefined) {
      this.fragmentCache.set(item, (bytes = encodeItemToKeep(item)));
      this.keptFragments.add(bytes);
    }
    return bytes;
  }

  /**
   * A listing's answer from its items' fragments. Joining them copies every byte (a fifth of a listing of
   * 1,000 kept views): when a listing's fragments are the very ones of its last answer, kept views all,
   * the last body is those bytes already. Kept for large listings only, within a bound; a body larger
   * than the bound is sent in slices (list-stream.ts), never joined whole.
   */
  private listAnswer(req: KernelRequest, fragments: Buffer[]): Answer {
    const key = fragments.length >= LIST_BODY_MIN_ITEMS
      ? `${req.path}\0${req.project}\0${req.allProjects}\0${req.recursion}\0${req.query.filter ?? ''}`
      : undefined;
    const last = key === undefined ? undefined : this.listBodies.get(key);
    if (last && last.fragments.length === fragments.length && last.fragments.every((f, i) => f === fragments[i])) return jsonAnswer(last.body);
    if (last) {
      this.listBodies.delete(key!);
      this.listBodyBytes -= last.body.length;
    }
    const parts = syncListParts(fragments);
    const length = partsLength(parts);
    if (length > LIST_BODY_MAX_BYTES) return { status: 200, type: JSON_TYPE, headers: { 'Content-Length': String(length) }, body: sliceStream(parts) };
    const body = Buffer.concat(parts, length);
    if (key !== undefined && fragments.every((f) => this.keptFragments.has(f))) {
      this.listBodies.set(key, { fragments, body });
      this.listBodyBytes += body.length;
      for (const [oldest, entry] of this.listBodies) {
        if (this.listBodyBytes <= LIST_BODY_MAX_BYTES && this.listBodies.size <= LIST_BODY_MAX_ENTRIES) break;
        this.listBodies.delete(oldest);
        this.listBodyBytes -= entry.body.length;
      }
    }
    return jsonAnswer(body);
  }

  private serialise(metadata: unknown): string | Buffer {
    // Lists grouped by a key (operations by status) holding kept views: those are serialised once (fragment()).
    if (isGroupedListing(metadata)) return syncGroupedBody(Object.entries(metadata).map(([group, items]) => [group, items.map((item) => this.fragment(item))]));
    return memoByIdentity(this.bodyCache, metadata, syncBody);
  }

  private etag(content: unknown): string {
    return memoByIdentity(this.etagCache, content, etagOf);
  }
}

const isReuseSlot = (value: Answer | ReuseSlot): value is ReuseSlot => 'token' in value;

/**
 * An object of arrays, one of them holding a frozen (kept) view. Asked of every sync answer: most are
 * objects whose first value is no array, and leave at once, with nothing allocated.
 */
function isGroupedListing(metadata: unknown): metadata is Record<string, unknown[]> {
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) return false;
  let kept = false;
  for (const key in metadata) {
    const items = (metadata as Record<string, unknown>)[key];
    if (!Array.isArray(items)) return false;
    kept ||= items.some((item) => typeof item === 'object' && item !== null && Object.isFrozen(item));
  }
  return kept;
}

/**
 * A handler's own headers, checked before anything is written: one node would refuse when writing
 * makes the answer a 500 with the error envelope here, in either lane (hapi would send its own text).
 */
function checkedHeaders(headers: Readonly<Record<string, string>> | undefined): Readonly<Record<string, string>> | undefined {
  if (headers) {
    for (const [name, value] of Object.entries(headers)) {
      validateHeaderName(name);
      validateHeaderValue(name, value);
    }
  }
  return headers;
}

/** What the pipeline needs of a request hapi received. */
function incomingOf(request: Request, params: Record<string, string>): Incoming {
  return {
    method: request.method, path: request.path, params, query: request.query as Record<string, unknown>,
    raw: request.raw.req, res: request.raw.res, payload: request.payload as Readable | undefined,
  };
}

/** Promise.all, skipped when no item is a promise (views kept by their plugin come back as they are). */
function settled(results: unknown[]): unknown[] | Promise<unknown[]> {
  return results.some((r) => typeof (r as PromiseLike<unknown> | undefined)?.then === 'function') ? Promise.all(results) : results;
}

/** Objects handed back unchanged (cached answers) are computed once; anything else every time. */
function memoByIdentity(cache: WeakMap<object, string>, value: unknown, compute: (value: unknown) => string): string {
  if (typeof value !== 'object' || value === null) return compute(value);
  let result = cache.get(value);
  if (result === undefined) {
    result = compute(value);
    cache.set(value, result);
  }
  return result;
}

export function checkAccess(caller: Caller, access: string, project: string, allProjects = false): void {
  if (access === 'untrusted') return;
  if (!caller.trusted && !(access === 'metrics' && caller.metrics)) throw forbidden();
  if (!caller.projects) return;
  // Listings shared by projects: the handler shows a restricted caller only what is its own.
  if (access === 'filtered') return;
  // Warnings, server config, pool changes: reads included, as the reference refuses them too.
  if (access === 'admin') throw forbidden('Restricted clients have no access to server-wide endpoints');
  // A restricted client sees its own projects only: asking for all of them is refused, as the reference does.
  if (allProjects) throw forbidden('Restricted clients cannot list all projects');
  if (!caller.projects.includes(project)) throw forbidden(`Not authorized for project "${project}"`);
}

function parseJsonBody(payload: unknown): unknown {
  return Buffer.isBuffer(payload) ? parseJsonText(payload.toString('utf8')) : undefined;
}

function parseRecursion(value: string | undefined): 0 | 1 | 2 {
  if (value === undefined || value === '') return 0;
  if (!/^-?\d+$/.test(value)) throw badRequest(`Invalid recursion value "${value}"`);
  const n = Number(value);
  return n <= 0 ? 0 : n === 1 ? 1 : 2;
}

/** How long filtering runs before it lets other requests in. */
const FILTER_SLICE_MS = 20;

/**
 * A filter over a large collection with costly patterns can take a while (matching is linear in
 * each field, but not free): it runs in slices so one request never holds up every other client.
 */
async function filterCooperatively(objects: unknown[], filter: CompiledFilter): Promise<boolean[]> {
  const keep: boolean[] = [];
  let sliceStart = performance.now();
  for (const obj of objects) {
    keep.push(filter(obj));
    if (performance.now() - sliceStart > FILTER_SLICE_MS) {
      await new Promise((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
  }
  return keep;
}

function parseFilterParam(value: string | undefined): CompiledFilter | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  try {
    return compileFilter(parseFilter(value));
  } catch (err) {
    if (err instanceof FilterSyntaxError) throw badRequest(`Invalid filter: ${err.message}`);
    throw err;
  }
}

/** One object's identity across its aliases (/1.0/containers/x is /1.0/instances/x). */
function writeKey(route: RouteDescriptor, req: KernelRequest): string {
  return JSON.stringify([route.path, req.project, req.params]);
}

function compileWebsocketRoute(path: string, fixed: Readonly<Record<string, string>>, spec: WebsocketSpec, locate: RouteDescriptor['locate']): WebsocketRoute {
  const names: string[] = [];
  const pattern = new RegExp('^' + path.replace(/[.+^$()|[\]\\]/g, '\\$&').replace(/\{(\w+)\}/g, (_, name: string) => {
    names.push(name);
    return '([^/]+)';
  }) + '/?$');
  return { path, fixed, pattern, names, spec, locate };
}

export function matchWebsocket(routes: WebsocketRoute[], pathname: string): { route: WebsocketRoute; params: Record<string, string> } | undefined {
  for (const route of routes) {
    const m = route.pattern.exec(pathname);
    if (!m) continue;
    const params: Record<string, string> = {};
    route.names.forEach((name, i) => (params[name] = decodeURIComponent(m[i + 1]!)));
    return { route, params };
  }
  return undefined;
}

