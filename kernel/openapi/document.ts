/**
 * The API description (OpenAPI 3.1) of a build, read from the route descriptors its plugins registered:
 * every path and alias, method, path and query parameter, JSON body shape, answer envelope and error
 * status. Response bodies are described down to the envelope only (descriptors declare no result shapes).
 */
import type { Description } from 'joi';
import type { QueryConvention, RouteDescriptor, VerbSpec, WebsocketSpec } from '../../sdk/index.js';
import { servedPaths } from '../http/route-paths.js';
import { errorStatuses, type AnsweringMethod, type PipelineFacts } from './error-answers.js';
import { isRequired, toJsonSchema, type JsonSchema } from './json-schema.js';
import { COMPONENTS, ERROR_RESPONSE, KERNEL_PARAMETERS, type ParameterObject } from './components.js';

export interface DescribedRoute {
  readonly owner: string;
  readonly route: Readonly<RouteDescriptor>;
}

export interface DocumentFacts extends PipelineFacts {
  readonly apiVersion: string;
  readonly serverVersion: string;
  /** The API extensions this build announces in GET /1.0. */
  readonly apiExtensions: readonly string[];
}

type Verb = 'get' | 'put' | 'patch' | 'post' | 'delete';
const VERBS: readonly Verb[] = ['get', 'put', 'patch', 'post', 'delete'];

export type OpenApiDocument = Record<string, unknown> & { paths: Record<string, Record<string, unknown>> };

export function describeApi(routes: readonly DescribedRoute[], facts: DocumentFacts): OpenApiDocument {
  const paths: Record<string, Record<string, unknown>> = {};
  const tags = new Set<string>();
  for (const { owner, route } of routes) {
    tags.add(owner);
    for (const { path, fixed } of servedPaths(route as RouteDescriptor)) {
      const template = openApiPath(path);
      const item: Record<string, unknown> = {};
      const names = parameterNames(path);
      // `project` and `target` are the kernel's on every route: said once for the path.
      item.parameters = [
        ...names.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
        KERNEL_PARAMETERS.project, KERNEL_PARAMETERS.target,
      ];
      const note = fixedNote(fixed);
      for (const verb of VERBS) {
        const served = servedVerb(route as RouteDescriptor, verb);
        if (!served) continue;
        item[verb] = operation(owner, route as RouteDescriptor, verb, served, names.length > 0, note, facts);
      }
      if (route.websocket) {
        item.get = item.get
          ? withUpgrade(item.get as Record<string, unknown>)
          : websocketOperation(owner, route.websocket, names.length > 0, note, facts);
      }
      paths[template] = item;
    }
  }
  const sortedPaths = Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b)));
  return {
    openapi: '3.1.0',
    info: {
      title: 'corral REST API',
      version: facts.apiVersion,
      description: [
        `The API this build of corral serves (wire-compatible with LXD ${facts.serverVersion}), generated from its route descriptors.`,
        'On the unix socket every caller is trusted; over HTTPS a client certificate in the trust store makes a caller trusted.',
        'Answers are JSON envelopes (sync, async for background operations, error); response metadata is not described beyond the envelope.',
      ].join(' '),
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    'x-api-extensions': [...facts.apiExtensions],
    tags: [...tags].sort().map((name) => ({ name, description: name === 'kernel' ? 'Served by the kernel' : `Served by the ${name} plugin` })),
    security: [{ clientCertificate: [] }],
    paths: sortedPaths,
    components: COMPONENTS,
  };
}

interface ServedVerb {
  spec: VerbSpec;
  /** PATCH that the kernel derives from PUT and `current`. */
  derived: boolean;
}

/** The methods the pipeline serves on a route (the same rule as RoutePipeline.verbSpec). */
function servedVerb(route: RouteDescriptor, verb: Verb): ServedVerb | undefined {
  const spec = route[verb];
  if (spec) return { spec, derived: false };
  if (verb === 'patch' && route.put && route.current) return { spec: route.put, derived: true };
  return undefined;
}

function operation(
  owner: string, route: RouteDescriptor, verb: Verb, { spec, derived }: ServedVerb, namesObject: boolean, note: string | undefined, facts: DocumentFacts,
): Record<string, unknown> {
  const access = spec.access ?? 'trusted';
  const op: Record<string, unknown> = { tags: [owner] };
  const summary = derived ? 'Change part of the object (merged into its current content)' : spec.description;
  if (summary) op.summary = summary;
  if (note) op.description = note;
  const parameters = queryParameters(spec.query?.describe(), spec.conventions ?? []);
  if (parameters.length) op.parameters = parameters;
  const body = requestBody(verb, spec, derived);
  if (body) op.requestBody = body;
  op.responses = responses(spec, errorStatuses({ verb, access, spec, namesObject, checksIfMatch: route.current !== undefined }, facts));
  if (access === 'untrusted') op.security = [{}, { clientCertificate: [] }];
  op['x-access'] = access;
  return op;
}

function websocketOperation(owner: string, spec: WebsocketSpec, namesObject: boolean, note: string | undefined, facts: DocumentFacts): Record<string, unknown> {
  const access = spec.access ?? 'trusted';
  const op: Record<string, unknown> = {
    tags: [owner],
    summary: 'Websocket (GET with Upgrade: websocket)',
  };
  if (note) op.description = note;
  const parameters = queryParameters(spec.query?.describe(), []);
  if (parameters.length) op.parameters = parameters;
  const responses: Record<string, unknown> = { 101: { description: 'Switching to the websocket protocol' } };
  for (const code of errorStatuses({ verb: 'websocket', access, namesObject, checksIfMatch: false }, facts)) responses[code] = ERROR_RESPONSE(code);
  op.responses = responses;
  if (access === 'untrusted') op.security = [{}, { clientCertificate: [] }];
  op['x-access'] = access;
  return op;
}

/** A route that serves both a plain GET and a websocket on one path. */
function withUpgrade(op: Record<string, unknown>): Record<string, unknown> {
  return { ...op, responses: { 101: { description: 'Switching to the websocket protocol (with Upgrade: websocket)' }, ...(op.responses as object) } };
}

function queryParameters(declared: Description | undefined, conventions: readonly QueryConvention[]): ParameterObject[] {
  const params: ParameterObject[] = conventions.map((convention) => KERNEL_PARAMETERS[convention]);
  const seen = new Set<string>(['project', 'target', ...conventions]);
  for (const [name, field] of Object.entries((declared?.keys ?? {}) as Record<string, Description>)) {
    if (seen.has(name)) continue;
    const schema = toJsonSchema(field);
    const param: ParameterObject = { name, in: 'query', schema };
    if (isRequired(field)) param.required = true;
    params.push(param);
  }
  return params;
}

function requestBody(verb: Verb, spec: VerbSpec, derived: boolean): Record<string, unknown> | undefined {
  // The pipeline reads no body on GET.
  if (verb === 'get') return undefined;
  const raw = { 'application/octet-stream': { schema: {} } };
  if (!spec.body) return spec.rawBody ? { description: 'The raw bytes (streamed)', content: raw } : undefined;
  const description = spec.body.describe();
  let schema: JsonSchema = toJsonSchema(description);
  // A streamed upload that also takes JSON (the handler reads and checks that itself against `body`).
  if (spec.rawBody) return { description: 'JSON, or the raw bytes of an upload (Content-Type: application/octet-stream)', content: { 'application/json': { schema }, ...raw } };
  if (derived) {
    // Any part of the PUT body: nothing is required, the merged result is checked against the PUT shape.
    const { required: _required, ...partial } = schema;
    schema = partial;
  }
  return { required: !derived && isRequired(description), content: { 'application/json': { schema } } };
}

function responses(spec: VerbSpec, errors: readonly number[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const answers = spec.answers ?? ['sync'];
  const sync = answers.includes('sync');
  const raw = answers.includes('raw');
  const listing = spec.conventions?.includes('filter') ?? false;
  if (sync || raw) out[200] = { $ref: `#/components/responses/${sync && raw ? 'SyncOrRaw' : raw ? 'Raw' : listing ? 'Listing' : 'Sync'}` };
  if (answers.includes('operation')) out[202] = { $ref: '#/components/responses/Operation' };
  for (const code of errors) out[code] = ERROR_RESPONSE(code);
  return out;
}

/** hapi's `{name*}`, `{name*2}` and `{name?}` are OpenAPI's `{name}`. */
function openApiPath(path: string): string {
  return path.replace(/\{(\w+)[*?]?\d*\}/g, '{$1}');
}

function parameterNames(path: string): string[] {
  return [...path.matchAll(/\{(\w+)[*?]?\d*\}/g)].map((m) => m[1]!);
}

function fixedNote(fixed: Readonly<Record<string, string>>): string | undefined {
  const entries = Object.entries(fixed);
  if (!entries.length) return undefined;
  return `This path serves only ${entries.map(([k, v]) => `${k} \`${v}\``).join(', ')}.`;
}
