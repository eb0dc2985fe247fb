/**
 * Routes as data, pipeline in the kernel. Descriptors become hapi routes whose one handler runs the
 * shared steps: access policy, query conventions (recursion, project, target, filter), If-Match,
 * body shape, the plugin's handler, and rendering of its response into the envelopes.
 */
import type Hapi from '@hapi/hapi';
import type { Request, ResponseToolkit } from '@hapi/hapi';
import type { ServerResponse } from 'node:http';
import type Logger from 'bunyan';
import {
  badRequest, forbidden, mergePatch, notFound, parseJsonText, preconditionFailed,
  type ApiResponse, type RouteDescriptor, type VerbSpec, type WebsocketSpec,
} from '../../sdk/index.js';
import { parseFilter, matchesFilter, FilterSyntaxError, type FilterExpr } from '../filter/index.js';
import { KernelRequest, flattenQuery, type Caller } from './api-request.js';
import { asyncBody, etagOf, syncBody } from './envelope.js';

const VERBS = ['get', 'put', 'patch', 'post', 'delete'] as const;
type Verb = (typeof VERBS)[number];

const DEFAULT_MAX_BYTES = 16 * 1024 * 1024;
const PROJECT_NAME = /^[^\s/\\?&#%*'"<>|]{1,63}$/;

export type Authenticate = (request: Request, access: string) => Promise<Caller>;

export interface PipelineOptions {
  log: Logger;
  /** Runs the kernel's `checkProject` hook (no-op when nobody tapped it). */
  checkProject: (req: KernelRequest) => Promise<void>;
  /** Whether `?target=` can name anything (clustering tapped in). */
  clustered: () => boolean;
  serverName: string;
}

interface WebsocketRoute {
  path: string;
  pattern: RegExp;
  names: string[];
  spec: WebsocketSpec;
}

let requestCounter = 0;
const nextRequestId = () => (++requestCounter).toString(36);

export class RoutePipeline {
  private readonly routes: { owner: string; route: RouteDescriptor }[] = [];
  private readonly owners = new Map<string, string>();
  readonly websockets: WebsocketRoute[] = [];
  /** Serialised sync bodies and ETags, by the identity of the object a handler returned (cached answers pay once). */
  private readonly bodyCache = new WeakMap<object, string>();
  private readonly etagCache = new WeakMap<object, string>();

  constructor(private readonly opts: PipelineOptions) {}

  add(owner: string, route: RouteDescriptor): void {
    for (const path of [route.path, ...(route.aliases ?? [])]) {
      if (!path.startsWith('/')) throw new Error(`${owner}: route path "${path}" must start with /`);
      const key = path.replace(/\{[^}]+\}/g, '{}');
      const other = this.owners.get(key);
      if (other) throw new Error(`route ${path} is registered by both ${other} and ${owner}`);
      this.owners.set(key, owner);
      if (route.websocket) this.websockets.push(compileWebsocketRoute(path, route.websocket));
    }
    this.routes.push({ owner, route });
  }

  /** Put every route on a hapi server (one per listener), authenticating callers with `authenticate`. */
  install(server: Hapi.Server, authenticate: Authenticate): void {
    for (const { route } of this.routes) {
      for (const path of [route.path, ...(route.aliases ?? [])]) {
        for (const verb of VERBS) {
          const spec = this.verbSpec(route, verb);
          if (!spec) continue;
          const rawBody = Boolean(spec.rawBody);
          server.route({
            method: verb.toUpperCase() as Uppercase<Verb>,
            path,
            options: {
              // Bodies are JSON whatever Content-Type a client sends (curl -d says form data), so the kernel parses them itself.
              payload: verb === 'get' ? undefined : {
                maxBytes: spec.maxBytes ?? DEFAULT_MAX_BYTES,
                parse: false,
                output: rawBody ? 'stream' : 'data',
                failAction: 'error',
              },
            },
            handler: (request, h) => this.serve(request, h, route, verb, spec, authenticate),
          });
        }
        server.route({ method: '*', path, handler: (request, h) => {
          // Browsers ask before cross-origin calls; the answer carries no body.
          if (request.method === 'options') return h.response().code(200);
          if (request.method === 'get' && route.websocket) throw badRequest('This endpoint needs a websocket upgrade');
          throw badRequest(`Method ${request.method.toUpperCase()} is not supported on ${request.path}`);
        } });
      }
    }
    server.route({ method: '*', path: '/{any*}', handler: () => { throw notFound(); } });
  }

  /** PATCH comes for free from PUT and `current`. */
  private verbSpec(route: RouteDescriptor, verb: Verb): VerbSpec | undefined {
    if (route[verb]) return route[verb];
    if (verb !== 'patch' || !route.put || !route.current) return undefined;
    const put = route.put;
    const current = route.current;
    return {
      ...put,
      // The PUT shape applies to the merged result, not to the partial body.
      body: undefined,
      handler: async (req) => {
        if (req.body !== undefined && (typeof req.body !== 'object' || req.body === null || Array.isArray(req.body))) {
          throw badRequest('A PATCH body must be a JSON object');
        }
        const merged = mergePatch((await current(req)) as Record<string, unknown>, req.body);
        req.body = put.body ? validateShape(put.body, merged, 'request body') : merged;
        return put.handler(req);
      },
    };
  }

  private async serve(request: Request, h: ResponseToolkit, route: RouteDescriptor, verb: Verb, spec: VerbSpec, authenticate: Authenticate) {
    const access = spec.access ?? 'trusted';
    const caller = await authenticate(request, access);
    const req = this.buildRequest(request.method, request.path, request.params as Record<string, string>, request.query as Record<string, unknown>,
      request.headers as Record<string, string | undefined>, caller, spec.rawBody ? undefined : parseJsonBody(request.payload), spec.rawBody ? (request.payload as NodeJS.ReadableStream) : undefined,
      request.raw.res);
    checkAccess(caller, access, req.project, req.allProjects);
    await this.checkProject(req);

    if (spec.query) validateShape(spec.query, req.query, 'query');
    if (spec.body && !spec.rawBody) req.body = validateShape(spec.body, req.body ?? {}, 'request body');
    if ((verb === 'put' || verb === 'patch') && route.current) await this.checkIfMatch(request, route, req);

    const filter = parseFilterParam(req.query.filter);
    const response = await spec.handler(req);
    return this.render(h, req, response, filter);
  }

  /** The `checkProject` hook for a request's project (`default` always exists). */
  async checkProject(req: KernelRequest): Promise<void> {
    if (req.project !== 'default') await this.opts.checkProject(req);
  }

  buildRequest(
    method: string, path: string, params: Record<string, string>, rawQuery: Record<string, unknown>,
    headers: Record<string, string | string[] | undefined>, caller: Caller, body: unknown, rawBody?: NodeJS.ReadableStream,
    response?: ServerResponse,
  ): KernelRequest {
    const query = flattenQuery(rawQuery);
    const project = query.project || 'default';
    if (!PROJECT_NAME.test(project)) throw badRequest(`Invalid project name "${project}"`);
    const target = query.target || undefined;
    if (target !== undefined && !this.opts.clustered() && target !== this.opts.serverName) throw badRequest('This server is not clustered');
    return new KernelRequest(
      nextRequestId(),
      method.toUpperCase(),
      path,
      params,
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

  private async checkIfMatch(request: Request, route: RouteDescriptor, req: KernelRequest): Promise<void> {
    const header = request.headers['if-match'];
    if (!header) return;
    const expected = etagOf(await route.current!(req));
    const offered = String(header).split(',').map((t) => t.trim().replace(/^W\//, '').replace(/^"|"$/g, ''));
    if (!offered.includes(expected) && !offered.includes('*')) throw preconditionFailed();
  }

  private async render(h: ResponseToolkit, req: KernelRequest, response: ApiResponse, filter: FilterExpr | undefined) {
    switch (response.kind) {
      case 'sync': {
        const r = h.response(this.serialise(response.metadata)).type('application/json');
        if (response.etag !== undefined) r.header('ETag', `"${this.etag(response.etag)}"`);
        if (response.location) r.header('Location', response.location);
        for (const [name, value] of Object.entries(response.headers ?? {})) r.header(name, value);
        return r;
      }
      case 'operation': {
        const view = response.operation.view();
        return h.response(asyncBody(view)).type('application/json').code(202).header('Location', response.operation.url);
      }
      case 'collection': {
        const level = req.recursion === 0 ? 1 : req.recursion;
        let items = response.items;
        let objects: unknown[] | undefined;
        if (filter) {
          const rendered = await Promise.all(items.map((item) => response.render(item, level)));
          const keep = rendered.map((obj) => matchesFilter(filter, obj));
          items = items.filter((_, i) => keep[i]);
          objects = rendered.filter((_, i) => keep[i]);
        }
        const metadata = req.recursion === 0
          ? items.map((item) => response.url(item))
          : objects ?? (await Promise.all(items.map((item) => response.render(item, level))));
        return h.response(syncBody(metadata)).type('application/json');
      }
      case 'raw': {
        const r = h.response(response.body as any).type(response.contentType);
        for (const [name, value] of Object.entries(response.headers ?? {})) r.header(name, value);
        return r;
      }
    }
  }

  private serialise(metadata: unknown): string {
    return memoByIdentity(this.bodyCache, metadata, syncBody);
  }

  private etag(content: unknown): string {
    return memoByIdentity(this.etagCache, content, etagOf);
  }
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
  if (access === 'admin') throw forbidden('Restricted clients cannot change server-wide settings');
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

function parseFilterParam(value: string | undefined): FilterExpr | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  try {
    return parseFilter(value);
  } catch (err) {
    if (err instanceof FilterSyntaxError) throw badRequest(`Invalid filter: ${err.message}`);
    throw err;
  }
}

function validateShape(schema: import('joi').Schema, value: unknown, what: string): any {
  const result = schema.validate(value, { abortEarly: true, convert: true });
  if (result.error) throw badRequest(`Invalid ${what}: ${result.error.message}`);
  return result.value;
}

function compileWebsocketRoute(path: string, spec: WebsocketSpec): WebsocketRoute {
  const names: string[] = [];
  const pattern = new RegExp('^' + path.replace(/[.+^$()|[\]\\]/g, '\\$&').replace(/\{(\w+)\}/g, (_, name: string) => {
    names.push(name);
    return '([^/]+)';
  }) + '/?$');
  return { path, pattern, names, spec };
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

