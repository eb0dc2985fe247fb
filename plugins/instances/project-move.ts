/**
 * Checks before an instance moves to another project (`instance_project_move`): the project
 * exists, the name is free there, the instance's profiles exist there and put its root disk on
 * the pool its volume is on, and the target project's rules (restrictions, limits) accept it.
 */
import { badRequest, conflict, notFound, ProjectsServiceRef, type PluginContext } from '../../sdk/index.js';
import type { InstanceHandle } from './access.js';
import type { InstanceManager } from './manager.js';

/** The same checks again (`recheck`) once the move's turn comes: the target may have changed meanwhile. */
export async function prepareProjectMove(ctx: PluginContext, manager: InstanceManager, handle: InstanceHandle, project: string, newName: string): Promise<{ recheck(): Promise<void> }> {
  const check = async () => {
    const projects = ctx.services.get(ProjectsServiceRef);
    // Builds without the projects plugin know no project but `default`.
    if (!(projects ? await projects.get(project) : project === 'default')) throw notFound(`Project "${project}" not found`);
    if (await manager.records.get(project, newName)) throw conflict(`Instance "${newName}" already exists in project "${project}"`);
    const { record } = handle;
    const checked = await manager.check(project, record.type, {
      architecture: record.architecture, config: record.config, devices: record.devices,
      ephemeral: record.ephemeral, profiles: record.profiles, description: record.description,
    }, { action: 'move', name: newName });
    if (checked.pool !== record.pool) {
      throw badRequest(`In project "${project}" the instance's root disk would be on pool "${checked.pool}", but its volume is on "${record.pool}"`);
    }
  };
  await check();
  return { recheck: check };
}
