/**
 * The projects plugin on its own (no instance, image or profile family): what other families
 * report through ProjectsService.contents shows in used_by, keeps the project from being renamed
 * or deleted, and networks count in /state.
 */
import test from 'ava';
import { startTestKernel, type TestKernel } from '../../sdk/testing/index.js';
import { ProjectsServiceRef, resourceUrl } from '../../sdk/index.js';

let k: TestKernel;

test.before(async () => {
  k = await startTestKernel({ plugins: ['projects'] });
});

test.after.always(async () => {
  await k?.stop();
});

test('contents reported by other families: used_by, rename and delete refused, networks counted against limits.networks', async (t) => {
  const projects = k.kernel.services.get(ProjectsServiceRef)!;
  t.truthy(projects);
  // What a networks family would report: the networks living in the project.
  const networks = new Map<string, string[]>();
  projects.contents.add((project) => (networks.get(project) ?? []).map((n) => resourceUrl(`/1.0/networks/${n}`, project)));

  t.is((await k.inject({ method: 'POST', url: '/1.0/projects', payload: { name: 'net', config: { 'features.networks': 'true', 'limits.networks': '3' } } })).statusCode, 200);
  // No profiles family in this build: the project holds nothing yet.
  t.deepEqual((await k.inject({ url: '/1.0/projects/net' })).json.metadata.used_by, []);

  networks.set('net', ['br1', 'br0']);
  t.deepEqual((await k.inject({ url: '/1.0/projects/net' })).json.metadata.used_by, ['/1.0/networks/br0?project=net', '/1.0/networks/br1?project=net']);
  const state = (await k.inject({ url: '/1.0/projects/net/state' })).json.metadata.resources;
  t.deepEqual(state.networks, { Limit: 3, Usage: 2 });
  t.deepEqual(state.instances, { Limit: -1, Usage: 0 });
  t.is((await k.inject({ method: 'DELETE', url: '/1.0/projects/net' })).statusCode, 400);
  t.is((await k.inject({ method: 'POST', url: '/1.0/projects/net', payload: { name: 'other' } })).statusCode, 400);
  t.is((await k.inject({ method: 'PATCH', url: '/1.0/projects/net', payload: { config: { 'features.networks': 'false' } } })).statusCode, 400);

  networks.delete('net');
  t.is((await k.inject({ method: 'DELETE', url: '/1.0/projects/net' })).statusCode, 200);
  t.is((await k.inject({ url: '/1.0/projects/net' })).statusCode, 404);
});

test('featureProject maps only what a project lacks; unknown projects map to themselves', async (t) => {
  const projects = k.kernel.services.get(ProjectsServiceRef)!;
  await k.inject({ method: 'POST', url: '/1.0/projects', payload: { name: 'half', config: { 'features.images': 'false' } } });
  t.is(await projects.featureProject('half', 'images'), 'default');
  t.is(await projects.featureProject('half', 'profiles'), 'half');
  t.is(await projects.featureProject('half', 'networks'), 'default', 'features.networks is not on by default');
  t.is(await projects.featureProject('default', 'images'), 'default');
  t.is(await projects.featureProject('ghost', 'images'), 'ghost');
  t.deepEqual((await projects.get('half'))?.config['features.images'], 'false');
  t.is(await projects.get('ghost'), undefined);
});
