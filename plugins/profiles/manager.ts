/**
 * Profile records and what changes them. Listeners (the instances family) see every change before
 * it is written, with the new content: one that throws refuses the change and nothing is stored.
 */
import {
  ApiError, badRequest, conflict, createUsedByRegistry, featureProjectOf, notFound,
  type Collection, type PluginContext, type Profile, type ProfileChange, type ProfilesService, type Requestor, type StoredDoc,
} from '../../sdk/index.js';
import { DEFAULT_PROFILE, profileUrl } from './profile.js';
import { SerialQueue } from './serial.js';

export interface ProfileEdit {
  description: string;
  config: Record<string, string>;
  devices: Profile['devices'];
}

export const PROFILES = 'profiles';

export class ProfileManager implements ProfilesService {
  readonly usedBy = createUsedByRegistry();
  readonly records: Collection<Profile>;
  private readonly listeners: ((change: ProfileChange) => Promise<void>)[] = [];
  private readonly queue = new SerialQueue();

  constructor(private readonly ctx: PluginContext) {
    this.records = ctx.store.collection<Profile>(PROFILES);
  }

  async load(project: string, names: string[]): Promise<Profile[]> {
    project = await featureProjectOf(this.ctx.services, project, 'profiles');
    const found: Profile[] = [];
    for (const name of names) {
      const stored = await this.records.get(project, name);
      if (!stored) throw badRequest(`Profile "${name}" doesn't exist`);
      found.push(stored.doc);
    }
    return found;
  }

  onChange(listener: (change: ProfileChange) => Promise<void>): void {
    this.listeners.push(listener);
  }

  async get(project: string, name: string): Promise<StoredDoc<Profile>> {
    const stored = await this.records.get(project, name);
    if (!stored) throw notFound('Profile not found');
    return stored;
  }

  async list(project: string): Promise<Profile[]> {
    return (await this.records.list(project)).map((s) => s.doc);
  }

  async createDefault(project: string): Promise<void> {
    await this.queue.run(project, async () => {
      if (await this.records.get(project, DEFAULT_PROFILE)) return;
      await this.records.put(project, DEFAULT_PROFILE, {
        name: DEFAULT_PROFILE, description: `Default LXD profile for project ${project}`, config: {}, devices: {},
      }, 0);
    });
  }

  async removeAll(project: string): Promise<void> {
    if (project === 'default') throw badRequest('The default project keeps its profiles');
    await this.queue.run(project, async () => {
      await this.ctx.store.transaction(async (tx) => {
        const records = tx.collection<Profile>(PROFILES);
        for (const stored of await records.list(project)) await records.delete(project, stored.name);
      });
    });
  }

  async moveProject(from: string, to: string): Promise<void> {
    await this.queue.run(from, () => this.queue.run(to, () => this.ctx.store.transaction(async (tx) => {
      const records = tx.collection<Profile>(PROFILES);
      for (const stored of await records.list(from)) await records.rename(from, stored.name, to, stored.name);
    })));
  }

  async create(project: string, profile: Profile, requestor?: Requestor): Promise<void> {
    await this.queue.run(project, async () => {
      if (await this.records.get(project, profile.name)) throw conflict(`Profile "${profile.name}" already exists`);
      const clean = this.checked(profile);
      await this.notify({ project, name: clean.name, profile: clean });
      await this.records.put(project, clean.name, clean, 0);
    });
    this.lifecycle('profile-created', project, profile.name, requestor);
  }

  async update(project: string, name: string, edit: ProfileEdit, requestor?: Requestor): Promise<void> {
    await this.queue.run(project, async () => {
      const { rev, doc } = await this.get(project, name);
      const clean = this.checked({ ...doc, ...edit });
      await this.notify({ project, name, profile: clean });
      await this.records.put(project, name, clean, rev);
    });
    this.lifecycle('profile-updated', project, name, requestor);
  }

  async rename(project: string, name: string, newName: string, requestor?: Requestor): Promise<void> {
    if (name === DEFAULT_PROFILE) throw new ApiError(403, `The "${DEFAULT_PROFILE}" profile cannot be renamed`);
    await this.queue.run(project, async () => {
      const { doc } = await this.get(project, name);
      if (await this.records.get(project, newName)) throw conflict(`Name "${newName}" already in use`);
      // Instances name their profiles; until they follow a rename, renaming a used profile would strand them.
      if ((await this.usedBy.collect(project, name)).length > 0) throw badRequest('Profile is currently in use and cannot be renamed');
      const renamed = { ...doc, name: newName };
      await this.notify({ project, name, newName, profile: renamed });
      await this.ctx.store.transaction(async (tx) => {
        const records = tx.collection<Profile>(PROFILES);
        const moved = await records.rename(project, name, project, newName);
        await records.put(project, newName, renamed, moved.rev);
      });
    });
    this.lifecycle('profile-renamed', project, newName, requestor, { old_name: name });
  }

  async delete(project: string, name: string, requestor?: Requestor): Promise<void> {
    if (name === DEFAULT_PROFILE) throw new ApiError(403, `The "${DEFAULT_PROFILE}" profile cannot be deleted`);
    await this.queue.run(project, async () => {
      const { rev } = await this.get(project, name);
      if ((await this.usedBy.collect(project, name)).length > 0) throw badRequest('Profile is currently in use');
      await this.notify({ project, name });
      await this.records.delete(project, name, rev);
    });
    this.lifecycle('profile-deleted', project, name, requestor);
  }

  /** Keys known to the instance scope (`user.*` always); "" unsets a key. */
  private checked(profile: Profile): Profile {
    this.ctx.keys.validate('instance', profile.config);
    const config = Object.fromEntries(Object.entries(profile.config).filter(([, v]) => v !== ''));
    return { name: profile.name, description: profile.description, config, devices: profile.devices };
  }

  private async notify(change: ProfileChange): Promise<void> {
    for (const listener of this.listeners) {
      try {
        await listener(change);
      } catch (err) {
        if (err instanceof ApiError) throw err;
        // A listener's plain Error is a refusal of the content, not a server fault.
        throw badRequest((err as Error).message);
      }
    }
  }

  private lifecycle(action: string, project: string, name: string, requestor?: Requestor, context?: Record<string, unknown>): void {
    this.ctx.events.lifecycle(action, profileUrl(project, name), { project, requestor, context });
  }
}
