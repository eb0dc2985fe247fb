/**
 * Projects: /1.0/projects, the `default` project, the `features.*` mapping and the policy gate
 * (ProjectsServiceRef), and the kernel's check that a request's `?project=` exists.
 */
import { definePlugin, notFound, ProjectsServiceRef, type PluginContext } from '../../sdk/index.js';
import { PROJECT_KEYS } from './keys.js';
import { ProjectManager, PROJECTS } from './manager.js';
import { defaultProject, DEFAULT_PROJECT, GLOBAL, type ProjectRecord } from './project.js';
import { projectRoutes } from './routes.js';
import { PolicyGate, vetProfileChanges } from './policy/index.js';

/** Per kernel: several test kernels may load this module in one process. */
const managers = new WeakMap<PluginContext, ProjectManager>();

export default definePlugin({
  register(ctx) {
    const projects = new ProjectManager(ctx);
    managers.set(ctx, projects);
    projects.policy = new PolicyGate(ctx.services, (project, feature) => projects.featureProject(project, feature));
    for (const key of PROJECT_KEYS) ctx.keys.register(key);
    ctx.services.provide(ProjectsServiceRef, projects);
    for (const route of projectRoutes(ctx, projects)) ctx.routes.add(route);
    ctx.hooks.checkProject.tap(async (req) => {
      if (!(await projects.get(req.project))) throw notFound(`Project "${req.project}" not found`);
    });
  },

  async boot(ctx) {
    const projects = managers.get(ctx)!;
    // Profiles register before projects: their edits reach the gate once every plugin is in place.
    vetProfileChanges(ctx.services, (proposal) => projects.vet(proposal));
    await ctx.store.migrate([{
      version: 1,
      description: 'the default project',
      up: async (store) => {
        await store.collection<ProjectRecord>(PROJECTS).put(GLOBAL, DEFAULT_PROJECT, defaultProject(), 0);
      },
    }]);
  },
});
