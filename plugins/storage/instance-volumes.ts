/**
 * Records of instance and image volumes: the description and config they carry (as custom volumes
 * do), and those of each snapshot as it was taken. The volume manager keeps them in step with the
 * volumes themselves: made with the volume (pool defaults, or what a copy or an import brings),
 * moved on rename, dropped on delete. A volume without a record (made before records existed)
 * reads as empty.
 */
import type { Collection, PluginContext, VolumeRef, VolumeState } from '../../sdk/index.js';

export interface InstanceVolumeRecord extends VolumeState {
  pool: string;
  type: VolumeRef['type'];
  name: string;
}

const key = (pool: string, vol: VolumeRef) => `${pool}/${vol.type}/${vol.name}`;

export const emptyVolumeState = (): VolumeState => ({ description: '', config: {}, snapshots: {} });

export class InstanceVolumeRecords {
  private readonly records: Collection<InstanceVolumeRecord>;

  constructor(ctx: PluginContext) {
    this.records = ctx.store.collection<InstanceVolumeRecord>('instance-volumes');
  }

  async get(pool: string, vol: VolumeRef): Promise<{ rev: number; state: VolumeState }> {
    const stored = await this.records.get(vol.project, key(pool, vol));
    if (!stored) return { rev: 0, state: emptyVolumeState() };
    const { description, config, snapshots } = stored.doc;
    return { rev: stored.rev, state: { description, config, snapshots: snapshots ?? {} } };
  }

  /** The states of many volumes of one type on a pool, in their order: one listing per project instead of a read each. */
  async states(pool: string, type: VolumeRef['type'], vols: readonly VolumeRef[]): Promise<VolumeState[]> {
    const byProject = new Map<string, Map<string, VolumeState>>();
    for (const project of new Set(vols.map((v) => v.project))) {
      const found = new Map<string, VolumeState>();
      for (const { name, doc } of await this.records.list(project, `${pool}/${type}/`)) {
        found.set(name, { description: doc.description, config: doc.config, snapshots: doc.snapshots ?? {} });
      }
      byProject.set(project, found);
    }
    return vols.map((v) => byProject.get(v.project)!.get(key(pool, v)) ?? emptyVolumeState());
  }

  /** Write the whole state; `expectedRev` as the store takes it (0: must not exist). */
  async put(pool: string, vol: VolumeRef, state: VolumeState, expectedRev?: number): Promise<void> {
    await this.records.put(vol.project, key(pool, vol), { pool, type: vol.type, name: vol.name, ...state }, expectedRev);
  }

  /** Change the record with `change` (a no-op when it returns undefined). */
  async update(pool: string, vol: VolumeRef, change: (state: VolumeState) => VolumeState | undefined): Promise<void> {
    const { rev, state } = await this.get(pool, vol);
    const next = change(state);
    if (next) await this.put(pool, vol, next, rev === 0 ? undefined : rev);
  }

  async delete(pool: string, vol: VolumeRef): Promise<void> {
    await this.records.delete(vol.project, key(pool, vol));
  }

  async rename(pool: string, vol: VolumeRef, newName: string, newProject?: string): Promise<void> {
    const stored = await this.records.get(vol.project, key(pool, vol));
    if (!stored) return;
    const to: VolumeRef = { ...vol, name: newName, project: newProject ?? vol.project };
    await this.records.delete(to.project, key(pool, to));
    await this.records.put(to.project, key(pool, to), { ...stored.doc, name: newName });
    await this.records.delete(vol.project, key(pool, vol));
  }
}
