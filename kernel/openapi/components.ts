/**
 * The parts of the API description every route shares: the three envelopes (spec part 2.1), the
 * operation object, the error answers and the query parameters the kernel implements for everybody.
 */
import type { QueryConvention } from '../../sdk/index.js';

export type ParameterObject = Record<string, unknown>;

const ERROR_MEANINGS: Record<number, string> = {
  400: 'Bad request: malformed query or body, or a value the server refuses',
  401: 'Unauthorized',
  403: 'Forbidden: the caller may not use this method (untrusted, or restricted to other projects)',
  404: 'Not found: the named object or project does not exist',
  409: 'Conflict: the name is in use or the object is busy',
  412: 'Precondition failed: If-Match names another version of the object',
  503: 'Unavailable: a cluster member, or the quorum of the cluster\'s database, cannot be reached now (nothing was changed)',
  500: 'Internal error',
};

export const ERROR_RESPONSE = (code: number): Record<string, unknown> => ({ $ref: `#/components/responses/Error${code}` });

const ref = (name: string) => ({ $ref: `#/components/parameters/${name}` });

export const KERNEL_PARAMETERS: Record<'project' | 'target' | QueryConvention, ParameterObject> = {
  project: ref('project'),
  target: ref('target'),
  recursion: ref('recursion'),
  filter: ref('filter'),
  'all-projects': ref('all-projects'),
};

const envelope = (type: string, status: string, statusCode: number, metadata: Record<string, unknown>) => ({
  type: 'object',
  required: ['type', 'status', 'status_code', 'operation', 'error_code', 'error', 'metadata'],
  properties: {
    type: { const: type },
    status: { const: status },
    status_code: { const: statusCode },
    operation: { type: 'string' },
    error_code: { type: 'integer' },
    error: { type: 'string' },
    metadata,
  },
});

export const COMPONENTS = {
  securitySchemes: {
    clientCertificate: {
      type: 'mutualTLS',
      description: 'A TLS client certificate in the trust store (HTTPS only; the unix socket trusts every local caller).',
    },
  },
  parameters: {
    project: {
      name: 'project', in: 'query', schema: { type: 'string', default: 'default' },
      description: 'The project the request works in (accepted by every route; an unknown project is a 404 where projects are enabled).',
    },
    target: {
      name: 'target', in: 'query', schema: { type: 'string' },
      description: 'The cluster member to act on (accepted by every route; a server that is not clustered accepts only its own name).',
    },
    recursion: {
      name: 'recursion', in: 'query', schema: { type: 'integer', default: 0 },
      description: '0 lists URLs, 1 full objects, 2 (where the route offers it) objects with their state and children.',
    },
    filter: {
      name: 'filter', in: 'query', schema: { type: 'string' },
      description: 'Keeps the listed objects that match (`field eq value`, with `ne`, `not`, `and`, `or`).',
    },
    'all-projects': {
      name: 'all-projects', in: 'query', schema: { type: 'boolean', default: false },
      description: 'Lists across every project.',
    },
  },
  schemas: {
    SyncResponse: envelope('sync', 'Success', 200, {}),
    ListResponse: envelope('sync', 'Success', 200, {
      type: 'array',
      description: 'URLs of the members (recursion 0) or the members themselves',
      items: { anyOf: [{ type: 'string' }, { type: 'object' }] },
    }),
    AsyncResponse: envelope('async', 'OK', 100, { $ref: '#/components/schemas/Operation' }),
    ErrorResponse: envelope('error', '', 0, {}),
    Operation: {
      type: 'object',
      required: ['id', 'class', 'description', 'created_at', 'updated_at', 'status', 'status_code', 'resources', 'metadata', 'may_cancel', 'err', 'location'],
      properties: {
        id: { type: 'string' },
        class: { enum: ['task', 'websocket', 'token'] },
        description: { type: 'string' },
        created_at: { type: 'string', format: 'date-time' },
        updated_at: { type: 'string', format: 'date-time' },
        status: { type: 'string' },
        status_code: { type: 'integer' },
        resources: { type: ['object', 'null'], additionalProperties: { type: 'array', items: { type: 'string' } } },
        metadata: { type: ['object', 'null'] },
        may_cancel: { type: 'boolean' },
        err: { type: 'string' },
        location: { type: 'string' },
      },
    },
  },
  responses: {
    Sync: {
      description: 'Success (sync envelope)',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/SyncResponse' } } },
    },
    Listing: {
      description: 'Success: the listing (sync envelope)',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/ListResponse' } } },
    },
    Raw: {
      description: 'Success: the resource itself, not an envelope',
      content: { '*/*': { schema: {} } },
    },
    SyncOrRaw: {
      description: 'Success: the sync envelope, or the resource itself (not an envelope)',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/SyncResponse' } }, '*/*': { schema: {} } },
    },
    Operation: {
      description: 'Accepted: a background operation (async envelope; its URL is also in the Location header)',
      headers: { Location: { schema: { type: 'string' }, description: 'The operation URL' } },
      content: { 'application/json': { schema: { $ref: '#/components/schemas/AsyncResponse' } } },
    },
    ...Object.fromEntries(Object.entries(ERROR_MEANINGS).map(([code, description]) => [`Error${code}`, {
      description: `${description} (error envelope)`,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } },
    }])),
  },
};
