/**
 * Project records and what changes them, `used_by` gathered from the families' services, the
 * `features.*` mapping the families ask for, and the policy gate they call (`vet`).
 */
import {
  badRequest, conflict, createUsedByRegistry, forbidden, notFound, truthy,
  ImagesServiceRef, InstancesServiceRef, ProfilesServiceRef, instanceUrl, resourceUrl,
  type Collection, type PluginContext, type ProjectFeature, type ProjectProposal, type ProjectsService, type Requestor, type StoredDoc,
} from '../../sdk/index.js';
import { DEFAULT_FEATURES, DEFAULT_PROJECT, FEATURES, GLOBAL, projectUrl, type ProjectRecord } from './project.js';
import { networkAllowed } from './policy/restrictions.js';

export const PROJECTS = 'projects';

export interface ProjectEdit {
  description: string;
  config: Record<string, string>;
}

/**
 * Restrictions and limits (plugins/projects/policy). The manager calls it; without one every
 * proposal passes.
 */
export interface ProjectPolicy {
  /** Throws an ApiError when the project's rules refuse the proposal. */
  vet(project: ProjectRecord, proposal: ProjectProposal): Promise<void>;
  /** Throws an ApiError when the project's new config does not fit what it already holds (a limit below current use...). */
  checkConfig?(project: string, before: Record<string, string>, after: Record<string, string>): Promise<void>;
}

const featureKey = (feature: ProjectFeature) => `features.${feature}`;

export class ProjectManager implements ProjectsService {
  readonly records: Collection<ProjectRecord>;
  /** Other families add what lives in a project beyond instances, profiles and images (custom volumes, networks). */
  readonly contents = createUsedByRegistry();
  policy: ProjectPolicy | undefined;

  constructor(private readonly ctx: PluginContext) {
    this.records = ctx.store.collection<ProjectRecord>(PROJECTS);
  }

  async get(name: string): Promise<ProjectRecord | undefined> {
    return (await this.records.get(GLOBAL, name))?.doc;
  }

  async load(name: string): Promise<StoredDoc<ProjectRecord>> {
    const stored = await this.records.get(GLOBAL, name);
    if (!stored) throw notFound(`Project "${name}" not found`);
    return stored;
  }

  async list(): Promise<ProjectRecord[]> {
    return (await this.records.list(GLOBAL)).map((s) => s.doc);
  }

  async featureProject(project: string, feature: ProjectFeature): Promise<string> {
    if (project === DEFAULT_PROJECT) return project;
    const found = await this.get(project);
    if (!found) return project;
    return truthy(found.config[featureKey(feature)]) ? project : DEFAULT_PROJECT;
  }

  async networkAllowed(project: string, network: string, managed: boolean): Promise<boolean> {
    const found = await this.get(project);
    return !found || networkAllowed(found.config, network, managed);
  }

  async vet(proposal: ProjectProposal): Promise<void> {
    if (!this.policy) return;
    const project = await this.get(proposal.project);
    if (!project) throw notFound(`Project "${proposal.project}" not found`);
    await this.policy.vet(project, proposal);
  }

  /**
   * What lives in the project, as URLs: instances, then its own profiles, images, and what other
   * families report. Each carries `?project=` outside `default`.
   */
  async usedBy(name: string): Promise<string[]> {
    const services = this.ctx.services;
    const [instances, profiles, images, more] = await Promise.all([
      services.get(InstancesServiceRef)?.list(name) ?? [],
      services.get(ProfilesServiceRef)?.list(name) ?? [],
      services.get(ImagesServiceRef)?.list(name) ?? [],
      this.contents.collect(name, name),
    ]);
    return [
      ...instances.map((i) => instanceUrl(name, i.name)).sort(),
      ...profiles.map((p) => resourceUrl(`/1.0/profiles/${encodeURIComponent(p.name)}`, name)).sort(),
      ...images.map((i) => resourceUrl(`/1.0/images/${i.fingerprint}`, name)).sort(),
      ...more,
    ];
  }

  /** Empty: nothing but the project's own `default` profile. */
  async isEmpty(name: string): Promise<boolean> {
    const ownDefault = resourceUrl('/1.0/profiles/default', name);
    return (await this.usedBy(name)).every((url) => url === ownDefault);
  }

  async create(name: string, edit: ProjectEdit, requestor?: Requestor): Promise<void> {
    if (await this.get(name)) throw conflict(`Project "${name}" already exists`);
    const config = this.checkedConfig(edit.config);
    for (const [key, value] of Object.entries(DEFAULT_FEATURES)) if (!(key in edit.config)) config[key] = value;
    const sorted = Object.fromEntries(Object.entries(config).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    this.checkCombination(sorted);
    const record: ProjectRecord = { name, description: edit.description, config: sorted };
    await this.records.put(GLOBAL, name, record, 0);
    try {
      if (truthy(sorted['features.profiles'])) await this.ctx.services.get(ProfilesServiceRef)?.createDefault(name);
    } catch (err) {
      await this.records.delete(GLOBAL, name).catch(() => {});
      throw err;
    }
    this.lifecycle('project-created', name, requestor);
  }

  async update(name: string, edit: ProjectEdit, requestor?: Requestor): Promise<void> {
    const stored = await this.load(name);
    const before = stored.doc.config;
    const config = this.checkedConfig(edit.config);
    const changed = FEATURES.filter((f) => truthy(before[featureKey(f)]) !== truthy(config[featureKey(f)]));
    if (changed.length && name === DEFAULT_PROJECT) throw badRequest('The features of the default project cannot be changed');
    if (changed.length && !(await this.isEmpty(name))) {
      throw badRequest(`"${featureKey(changed[0]!)}" cannot be changed while the project holds instances, images, profiles, volumes or networks`);
    }
    this.checkCombination(config);
    await this.policy?.checkConfig?.(name, before, config);
    await this.records.put(GLOBAL, name, { ...stored.doc, description: edit.description, config }, stored.rev);
    if (changed.includes('profiles')) {
      const profiles = this.ctx.services.get(ProfilesServiceRef);
      try {
        if (truthy(config['features.profiles'])) await profiles?.createDefault(name);
        else await profiles?.removeAll(name);
      } catch (err) {
        const now = await this.load(name);
        await this.records.put(GLOBAL, name, stored.doc, now.rev).catch(() => {});
        throw err;
      }
    }
    this.lifecycle('project-updated', name, requestor);
  }

  /** Checks a rename can go ahead; the rename itself runs as an operation (`rename`). */
  async checkRename(name: string, newName: string): Promise<void> {
    if (name === DEFAULT_PROJECT) throw forbidden('The default project cannot be renamed');
    await this.load(name);
    if (newName === name) throw badRequest('The new name is the current name');
    if (await this.get(newName)) throw conflict(`Project "${newName}" already exists`);
    if (!(await this.isEmpty(name))) throw badRequest('Only empty projects can be renamed; this one still holds resources');
  }

  async rename(name: string, newName: string, requestor?: Requestor): Promise<void> {
    await this.checkRename(name, newName);
    const stored = await this.load(name);
    const moved = await this.records.rename(GLOBAL, name, GLOBAL, newName);
    try {
      await this.records.put(GLOBAL, newName, { ...stored.doc, name: newName }, moved.rev);
      await this.ctx.services.get(ProfilesServiceRef)?.moveProject(name, newName);
    } catch (err) {
      await this.records.rename(GLOBAL, newName, GLOBAL, name).then((back) => this.records.put(GLOBAL, name, stored.doc, back.rev)).catch(() => {});
      throw err;
    }
    this.lifecycle('project-renamed', newName, requestor, { old_name: name });
  }

  async delete(name: string, requestor?: Requestor): Promise<void> {
    if (name === DEFAULT_PROJECT) throw forbidden('The default project cannot be deleted');
    const stored = await this.load(name);
    if (!(await this.isEmpty(name))) throw badRequest('Only empty projects can be deleted; this one still holds resources');
    await this.records.delete(GLOBAL, name, stored.rev);
    try {
      await this.ctx.services.get(ProfilesServiceRef)?.removeAll(name);
    } catch (err) {
      await this.records.put(GLOBAL, name, stored.doc, 0).catch(() => {});
      throw err;
    }
    this.lifecycle('project-deleted', name, requestor);
  }

  /** Known keys with valid values; "" unsets. */
  private checkedConfig(config: Record<string, string>): Record<string, string> {
    this.ctx.keys.validate('project', config);
    // Stored in key order, as the reference shows config maps.
    return Object.fromEntries(Object.entries(config).filter(([, v]) => v !== '').sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }

  /** Rules between keys of one project config. */
  private checkCombination(config: Record<string, string>): void {
    // Restrictions are checked on profiles too: they must be the project's own to be held to them.
    if (truthy(config.restricted) && !truthy(config['features.profiles'])) {
      throw badRequest('A restricted project needs its own profiles (features.profiles=true)');
    }
  }

  private lifecycle(action: string, name: string, requestor?: Requestor, context?: Record<string, unknown>): void {
    this.ctx.events.lifecycle(action, projectUrl(name), { project: name, requestor, context });
  }
}
