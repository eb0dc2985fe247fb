/**
 * The policy gate as the projects plugin runs it: gathers what a project holds through the
 * families' services (instances with profiles applied, profiles), then asks the pure checks.
 * Nothing is gathered for a project with no restriction or limit, so the common case costs a
 * config read.
 */
import {
  CustomVolumesServiceRef, InstancesServiceRef, ProfilesServiceRef,
  type ProjectFeature, type ProjectProposal, type ProjectView, type ServiceRegistry,
} from '../../../sdk/index.js';
import { emptyContents, type ProjectContents } from './contents.js';
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

  /** Before a project's config changes from `before` to `after`. */
  async checkConfig(project: string, before: ProjectConfig, after: ProjectConfig): Promise<void> {
    if (!hasPolicy(after)) return;
    vetProjectConfig(project, before, after, await this.contents(project));
  }

  /** The project's instances (expanded with the profiles they name), profiles and images. */
  async contents(project: string): Promise<ProjectContents> {
    const contents = emptyContents();
    const instances = (await this.services.get(InstancesServiceRef)?.list(project)) ?? [];
    for (const inst of instances) {
      contents.instances.push({
        name: inst.name, type: inst.type, config: inst.expandedConfig, devices: inst.expandedDevices, profiles: inst.profiles,
        own: { config: inst.config, devices: inst.devices },
      });
    }
    const profileProject = await this.featureProject(project, 'profiles');
    const profiles = this.services.get(ProfilesServiceRef);
    if (profiles) {
      // A profile edit re-expands the instances using it: they need every profile they name, wherever it lives.
      contents.profiles = await profiles.list(profileProject);
    }
    // Custom volumes count where they live. Images do not count (decision 0008): like the reference.
    const volumes = this.services.get(CustomVolumesServiceRef);
    if (volumes && (await this.featureProject(project, 'storage.volumes')) === project) {
      contents.volumes = volumes.list(project).map((v) => ({ pool: v.pool, name: v.name, size: v.config.size }));
    }
    return contents;
  }
}

/**
 * Profile creations and edits pass the gate before they are written: the profiles family lets a
 * change listener refuse a change. Call once every plugin has registered (boot).
 */
export function vetProfileChanges(services: ServiceRegistry, vet: (proposal: ProjectProposal) => Promise<void>): void {
  services.get(ProfilesServiceRef)?.onChange(async (change) => {
    if (!change.profile) return;
    await vet({ kind: 'profile', project: change.project, name: change.newName ?? change.name, config: change.profile.config, devices: change.profile.devices });
  });
}
