/**
 * The policy gate as the projects plugin runs it: gathers what a project holds through the
 * families' services (instances with profiles applied, profiles), then asks the pure checks.
 * Nothing is gathered for a project with no restriction or limit, so the common case costs a
 * config read.
 */
import {
  InstancesServiceRef, ProfilesServiceRef,
  type Profile, type ProjectFeature, type ProjectProposal, type ProjectView, type ServiceRegistry,
} from '../../../sdk/index.js';
import { emptyContents, expand, type ProjectContents } from './contents.js';
import { isRestricted, type ProjectConfig } from './restrictions.js';
import { vetProjectConfig, vetProposal } from './vet.js';

/** Whether any key the policy reads is set. */
export const hasPolicy = (config: ProjectConfig): boolean =>
  isRestricted(config) || Object.entries(config).some(([k, v]) => k.startsWith('limits.') && v !== '');

export class PolicyGate {
  constructor(
    private readonly services: ServiceRegistry,
    private readonly featureProject: (project: string, feature: ProjectFeature) => Promise<string>,
  ) {}

  async vet(project: ProjectView, proposal: ProjectProposal): Promise<void> {
    if (!hasPolicy(project.config)) return;
    // Snapshots and backups depend on the config alone.
    const contents = proposal.kind === 'snapshot' || proposal.kind === 'backup' ? emptyContents() : await this.contents(project.name);
    vetProposal(project.name, project.config, contents, proposal);
  }

  /** Before a project's config changes from `project.config` to `config`. */
  async vetConfigChange(project: ProjectView, config: ProjectConfig): Promise<void> {
    if (!hasPolicy(config)) return;
    vetProjectConfig(project.name, project.config, config, await this.contents(project.name));
  }

  /** The project's instances (expanded with the profiles they name) and profiles. */
  async contents(project: string): Promise<ProjectContents> {
    const contents = emptyContents();
    const instances = (await this.services.get(InstancesServiceRef)?.list(project)) ?? [];
    const profilesService = this.services.get(ProfilesServiceRef);
    if (!profilesService) return contents;
    const profileProject = await this.featureProject(project, 'profiles');
    const all = await profilesService.list(profileProject);
    const byName = new Map<string, Profile>(all.map((p) => [p.name, p]));
    if (profileProject === project) contents.profiles = all;
    for (const inst of instances) {
      const own = { config: inst.config, devices: inst.devices };
      const { config, devices } = expand(inst.profiles.map((n) => byName.get(n)).filter((p) => p !== undefined), own);
      contents.instances.push({ name: inst.name, type: inst.type, config, devices, profiles: inst.profiles, own });
    }
    // Custom volumes, image volumes and networks join the count when their families exist in this build.
    return contents;
  }
}
