/**
 * The API description: the OpenAPI document of the `full` and the `edge` builds passes a real
 * validator, describes exactly the method+path pairs the listener serves (hapi's own route table of
 * a server the pipeline installed itself on, and its websockets), and says what the kernel and the
 * descriptors know: kernel query parameters, body shapes, envelopes, error statuses.
 */
import test from 'ava';
import Hapi from '@hapi/hapi';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startTestKernel, type TestKernel } from '../../sdk/testing/index.js';
import { UNIX_CALLER, createHapiServer } from '../../kernel/http/listeners.js';
import { RoutePipeline } from '../../kernel/http/pipeline.js';
import { collection, conflict, objectBody, raw } from '../../sdk/index.js';
import Joi from 'joi';
import bunyan from 'bunyan';

const METHODS = ['get', 'put', 'patch', 'post', 'delete'];
const openApiPath = (hapiPath: string) => hapiPath.replace(/\{(\w+)[*?]?\d*\}/g, '{$1}');

/** `METHOD path` of every operation the document describes. */
function described(doc: any): string[] {
  const out: string[] = [];
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const method of METHODS) if (item[method]) out.push(`${method.toUpperCase()} ${path}`);
  }
  return out.sort();
}

/** `METHOD path` of every route a listener serves: the paths installed on it, and the websocket upgrades. */
async function served(k: TestKernel): Promise<string[]> {
  const server = Hapi.server();
  k.kernel.pipeline.install(server, async () => UNIX_CALLER);
  // The pipeline routes each path itself (one hapi route for all); every served path must be among them.
  const installed = new Set(k.kernel.pipeline.installedPaths(server));
  const pairs = new Set<string>();
  for (const pair of k.kernel.pipeline.servedMethods()) {
    const [method, path] = pair.split(' ') as [string, string];
    if (!installed.has(path)) throw new Error(`${pair} is not installed on the listener`);
    pairs.add(`${method} ${openApiPath(path)}`);
  }
  for (const ws of k.kernel.pipeline.websockets) pairs.add(`GET ${openApiPath(ws.path)}`);
  return [...pairs].sort();
}

async function validate(doc: unknown): Promise<{ valid: boolean; errors: unknown }> {
  const result = await new Validator().validate(doc as Parameters<Validator["validate"]>[0]);
  return { valid: result.valid, errors: result.errors };
}

for (const set of ['full', 'edge']) {
  test(`the ${set} build's OpenAPI document is valid and describes every served method and path, and nothing else`, async (t) => {
    const k = await startTestKernel({ plugins: set });
    try {
      const res = await k.inject({ url: '/openapi.json' });
      t.is(res.statusCode, 200);
      t.regex(String(res.headers['content-type']), /^application\/json/);
      const doc = JSON.parse(res.body);
      t.is(doc.openapi, '3.1.0');
      const { valid, errors } = await validate(doc);
      t.true(valid, JSON.stringify(errors, null, 1));
      t.deepEqual(described(doc), await served(k));
      t.deepEqual(doc['x-api-extensions'], (await k.inject({ url: '/1.0' })).json.metadata.api_extensions);
    } finally {
      await k.stop();
    }
  });
}

test('a trimmed build describes only what it serves', async (t) => {
  const edge = await startTestKernel({ plugins: 'edge' });
  const full = await startTestKernel({ plugins: 'full' });
  try {
    const edgeDoc = JSON.parse((await edge.inject({ url: '/openapi.json' })).body);
    const fullDoc = JSON.parse((await full.inject({ url: '/openapi.json' })).body);
    for (const path of ['/1.0/projects', '/1.0/metrics', '/1.0/resources', '/1.0/network-acls']) {
      t.truthy(fullDoc.paths[path], `${path} is in the full build`);
      t.is(edgeDoc.paths[path], undefined, `${path} is not in the edge build`);
      t.is((await edge.inject({ url: path })).statusCode, 404, `${path} is not served by the edge build`);
    }
    const edgePlugins = new Set(edge.kernel.pipeline.registered().map((r) => r.owner));
    t.true(edgeDoc.tags.every((tag: { name: string }) => edgePlugins.has(tag.name)));
    // Without the projects plugin nobody checks `?project=`: no 404 for an unknown project on a path that names nothing.
    t.deepEqual(Object.keys(edgeDoc.paths['/1.0/instances'].get.responses), ['200', '400', '403', '500']);
    // The full build can form a cluster: any request may meet an unreachable member or a lost quorum.
    t.deepEqual(Object.keys(fullDoc.paths['/1.0/instances'].get.responses), ['200', '400', '403', '404', '500', '503']);
  } finally {
    await edge.stop();
    await full.stop();
  }
});

test('the document carries the kernel conventions, body shapes, envelopes and error statuses', async (t) => {
  const k = await startTestKernel({ plugins: 'full' });
  try {
    const doc = JSON.parse((await k.inject({ url: '/openapi.json' })).body);
    const params = (op: any) => (op.parameters ?? []).map((p: any) => p.name ?? p.$ref.split('/').pop());

    const list = doc.paths['/1.0/instances'].get;
    t.deepEqual(params(list), ['recursion', 'filter', 'all-projects']);
    t.is(list.responses['200'].$ref, '#/components/responses/Listing');
    t.is(doc.components.responses.Listing.content['application/json'].schema.$ref, '#/components/schemas/ListResponse');
    t.deepEqual(params(doc.paths['/1.0/profiles'].get), ['recursion', 'filter']);
    t.deepEqual(params(doc.paths['/1.0/profiles/{name}'].get), [], 'a single object takes no listing parameters');
    t.deepEqual(params(doc.paths['/1.0/operations/{id}/wait'].get), ['timeout', 'secret'], 'a query shape the route declares');
    // Every route takes `project` and `target` (the kernel checks them): said once per path.
    t.deepEqual(params(doc.paths['/1.0/profiles/{name}']), ['name', 'project', 'target']);
    t.deepEqual(doc.paths['/1.0/profiles/{name}'].parameters[0], { name: 'name', in: 'path', required: true, schema: { type: 'string' } });
    t.deepEqual(params(doc.paths['/']), ['project', 'target']);

    // Background operations answer 202 with the async envelope; the handler's own 409 is declared.
    const create = doc.paths['/1.0/instances'].post;
    t.deepEqual(Object.keys(create.responses), ['202', '400', '403', '404', '409', '500', '503']);
    t.is(create.responses['202'].$ref, '#/components/responses/Operation');
    t.truthy(create.requestBody.content['application/json'].schema.properties.name, 'JSON body shape');
    t.truthy(create.requestBody.content['application/octet-stream'], 'or a backup upload');

    // PUT checks If-Match (412); PATCH is derived from PUT and takes any part of its body.
    const profile = doc.paths['/1.0/profiles/{name}'];
    t.deepEqual(Object.keys(profile.put.responses), ['200', '400', '403', '404', '412', '500', '503']);
    const putBody = profile.put.requestBody.content['application/json'].schema;
    const patchBody = profile.patch.requestBody.content['application/json'].schema;
    t.is(profile.put.requestBody.required, true);
    t.is(profile.patch.requestBody.required, false);
    t.deepEqual(patchBody.properties, putBody.properties);
    t.is(patchBody.required, undefined);
    t.deepEqual(putBody.properties.config, {
      type: ['object', 'null'], additionalProperties: false, patternProperties: { '^': { type: 'string' } },
    }, 'a config map: string values under any key');

    // Who may call: GET / and GET /1.0 are open to anyone (no 403), PUT /1.0 needs an unrestricted client.
    t.deepEqual(Object.keys(doc.paths['/'].get.responses), ['200', '400', '404', '500', '503']);
    t.deepEqual(doc.paths['/1.0'].get.security, [{}, { clientCertificate: [] }]);
    t.is(doc.paths['/1.0'].put['x-access'], 'admin');
    t.is(doc.paths['/openapi.json'].get['x-access'], 'untrusted');
    t.deepEqual(doc.paths['/1.0'].put.requestBody.content['application/json'].schema.properties.config.additionalProperties,
      { anyOf: [{ type: 'string' }, { type: 'boolean' }, { type: 'null' }] });

    // Websockets are GETs that switch protocols; raw answers are the resource itself.
    t.truthy(doc.paths['/1.0/events'].get.responses['101']);
    t.is(doc.paths['/1.0/instances/{name}/logs/{file}'].get.responses['200'].$ref, '#/components/responses/Raw');
    t.is(doc.paths['/1.0/instances/{name}/files'].get.responses['200'].$ref, '#/components/responses/SyncOrRaw');
    t.is(doc.paths['/1.0/containers/{name}'].get.description, 'This path serves only type `container`.');
    t.deepEqual(Object.keys(doc.components.responses).filter((r) => r.startsWith('Error')), ['Error400', 'Error401', 'Error403', 'Error404', 'Error409', 'Error412', 'Error500', 'Error503']);
  } finally {
    await k.stop();
  }
});

test('every listing and plain GET answers the kind its descriptor declares', async (t) => {
  const k = await startTestKernel({ plugins: 'full' });
  try {
    const doc = JSON.parse((await k.inject({ url: '/openapi.json' })).body);
    const plain = Object.entries<any>(doc.paths).filter(([path, item]) => !path.includes('{') && item.get && !item.get.responses['101']);
    t.true(plain.length > 10);
    for (const [path] of plain) {
      const res = await k.inject({ url: `${path}?recursion=1` });
      // A standalone server refuses the lists of cluster members and groups, as the reference does (an error envelope, declared).
      if (path === '/1.0/cluster/members' || path === '/1.0/cluster/groups') {
        t.is(res.statusCode, 400, `GET ${path}: ${res.body.slice(0, 200)}`);
        continue;
      }
      // The web page's /ui answers a redirect to /ui/ (a raw answer as well).
      if (res.statusCode === 301) t.is(res.headers.location, `${path}/`, `GET ${path}`);
      else t.is(res.statusCode, 200, `GET ${path}: ${res.body.slice(0, 200)}`);
    }
    t.deepEqual(k.kernel.pipeline.misdeclaredRoutes(), []);
  } finally {
    await k.stop();
  }
});

test('a handler that answers a kind or an error status its descriptor does not declare is reported', async (t) => {
  const log = bunyan.createLogger({ name: 'openapi-test', level: 'fatal' });
  const pipeline = new RoutePipeline({
    log,
    checkProject: async () => undefined,
    projectsChecked: () => false,
    clustered: () => false,
    serverName: () => 'none',
  });
  pipeline.add('test', { path: '/1.0/said-sync', get: { handler: () => raw('bytes') } });
  pipeline.add('test', { path: '/1.0/said-raw', get: { answers: ['raw'], handler: () => raw('bytes') } });
  pipeline.add('test', { path: '/1.0/unsaid-listing', get: { handler: () => collection(['a'], (x) => `/1.0/x/${x}`, (x) => ({ x })) } });
  pipeline.add('test', { path: '/1.0/unsaid-conflict', post: { handler: () => { throw conflict('taken'); } } });
  pipeline.add('test', { path: '/1.0/said-conflict', post: { errors: [409], handler: () => { throw conflict('taken'); } } });
  pipeline.add('test', { path: '/1.0/kernel-refusal', post: { body: objectBody({ name: Joi.string() }), handler: () => raw('') } });
  const server = createHapiServer({ log, headers: () => ({}) });
  pipeline.install(server, async () => UNIX_CALLER);
  for (const url of ['/1.0/said-sync', '/1.0/said-raw', '/1.0/unsaid-listing']) t.is((await server.inject(url)).statusCode, 200);
  for (const url of ['/1.0/unsaid-conflict', '/1.0/said-conflict']) t.is((await server.inject({ method: 'POST', url })).statusCode, 409);
  t.is((await server.inject({ method: 'POST', url: '/1.0/kernel-refusal', payload: '{"name": 1}' })).statusCode, 400, 'a 400 of the pipeline is always listed');
  t.deepEqual(pipeline.misdeclaredRoutes().sort(), ['get /1.0/said-sync', 'get /1.0/unsaid-listing', 'post /1.0/unsaid-conflict 409']);
});

test('the document is written once per boot, and no route can be added after boot', async (t) => {
  const k = await startTestKernel({ plugins: 'edge' });
  try {
    const first = (await k.inject({ url: '/openapi.json' })).body;
    t.is((await k.inject({ url: '/openapi.json' })).body, first);
    t.throws(() => k.kernel.pipeline.add('late', { path: '/1.0/late', get: { handler: () => ({ kind: 'sync', metadata: {} }) } }), { message: /sealed/ });
    t.is(JSON.parse((await k.inject({ url: '/openapi.json' })).body).paths['/1.0/late'], undefined);
  } finally {
    await k.stop();
  }
});
