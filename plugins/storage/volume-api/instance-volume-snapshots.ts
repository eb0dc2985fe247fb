/**
 * Snapshots of instance volumes through the volume API: listed and shown with the description and
 * config their volume had when they were taken, and their description edited. They are made,
 * renamed, restored and deleted through their instance (the instances family owns them).
 */
import {
  badRequest, notFound, type ApiRequest, type VolumeRef, type VolumeType,
} from '../../../sdk/index.js';
import type { VolumeManager } from '../volumes.js';
import { NEVER, volumeUrl } from './record.js';
import type { VolumeUsers } from './users.js';

export interface InstanceSnapshotView {
  description: string;
  expires_at: string;
  name: string;
  config: Record<string, string>;
  content_type: 'filesystem' | 'block';
  created_at: string;
}

export class InstanceVolumeSnapshots {
  constructor(private readonly volumes: VolumeManager, private readonly users: VolumeUsers) {}

  /** The instance volume the request names, or a 404; image volumes have no snapshots. */
  private async volume(req: ApiRequest): Promise<{ pool: string; ref: VolumeRef }> {
    const pool = req.params.pool!;
    const type = req.params.type as VolumeType;
    if (type === 'image') throw badRequest('Image volumes have no snapshots');
    const inst = (await this.users.instancesOnPool(pool, req.project)).find((i) => i.type === type && i.name === req.params.name);
    if (!inst) throw notFound(`Storage volume "${req.params.name}" not found on pool "${pool}"`);
    return { pool, ref: { type, project: inst.project, name: inst.name } };
  }

  private view(ref: VolumeRef, name: string, state: { description: string; config: Record<string, string> } | undefined): InstanceSnapshotView {
    return {
      description: state?.description ?? '', expires_at: NEVER, name, config: state?.config ?? {},
      content_type: ref.type === 'virtual-machine' ? 'block' : 'filesystem', created_at: NEVER,
    };
  }

  async list(req: ApiRequest): Promise<{ url: string; view: InstanceSnapshotView }[]> {
    const { pool, ref } = await this.volume(req);
    const state = await this.volumes.volumeState(pool, ref);
    return (await this.volumes.listSnapshots(pool, ref)).map((name) => ({
      url: volumeUrl(pool, ref.type, ref.name, ref.project).replace(/(\?|$)/, `/snapshots/${encodeURIComponent(name)}$1`),
      view: this.view(ref, name, state.snapshots[name]),
    }));
  }

  async get(req: ApiRequest): Promise<InstanceSnapshotView> {
    const { pool, ref } = await this.volume(req);
    const name = req.params.snapshot!;
    if (!(await this.volumes.listSnapshots(pool, ref)).includes(name)) throw notFound(`Storage volume snapshot "${ref.name}/${name}" not found on pool "${pool}"`);
    return this.view(ref, name, (await this.volumes.volumeState(pool, ref)).snapshots[name]);
  }

  /** A new description; the rest of a snapshot is what it was when taken. */
  async describe(req: ApiRequest, description: string): Promise<void> {
    const { pool, ref } = await this.volume(req);
    const name = req.params.snapshot!;
    if (!(await this.volumes.listSnapshots(pool, ref)).includes(name)) throw notFound(`Storage volume snapshot "${ref.name}/${name}" not found on pool "${pool}"`);
    await this.volumes.records.update(pool, ref, (s) => ({
      ...s, snapshots: { ...s.snapshots, [name]: { config: s.snapshots[name]?.config ?? {}, description } },
    }));
  }
}
