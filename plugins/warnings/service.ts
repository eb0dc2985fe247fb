/** Stores warnings: a warning raised again for the same type and entity is counted, not duplicated. */
import { randomUUID } from 'node:crypto';
import type { Collection, WarningInput, WarningsService } from '../../sdk/index.js';
import type { Warning } from './warning.js';

export class WarningStore implements WarningsService {
  constructor(private readonly records: Collection<Warning>, private readonly location: string) {}

  async raise(input: WarningInput): Promise<void> {
    const project = input.project ?? '';
    const entity = input.entityUrl ?? '';
    const now = new Date().toISOString();
    const existing = (await this.records.list(project)).find((r) => r.doc.type === input.type && r.doc.entity_url === entity);
    if (existing) {
      const w = existing.doc;
      await this.records.put(project, w.uuid, {
        ...w,
        count: w.count + 1,
        last_seen_at: now,
        last_message: input.message,
        severity: input.severity ?? w.severity,
        // A warning that comes back after being resolved is news again; an acknowledged one stays acknowledged.
        status: w.status === 'resolved' ? 'new' : w.status,
      });
      return;
    }
    const uuid = randomUUID();
    // Field order as the reference lists it.
    await this.records.put(project, uuid, {
      status: 'new',
      uuid,
      location: this.location,
      project,
      type: input.type,
      count: 1,
      first_seen_at: now,
      last_seen_at: now,
      last_message: input.message,
      severity: input.severity ?? 'low',
      entity_url: entity,
    }, 0);
  }

  async resolve(type: string, entityUrl?: string): Promise<void> {
    for (const { project, doc } of await this.records.list()) {
      if (doc.type !== type || (entityUrl !== undefined && doc.entity_url !== entityUrl) || doc.status === 'resolved') continue;
      await this.records.put(project, doc.uuid, { ...doc, status: 'resolved' });
    }
  }

  async find(uuid: string): Promise<{ project: string; rev: number; doc: Warning } | undefined> {
    return (await this.records.list()).find((r) => r.name === uuid);
  }

  async setStatus(project: string, warning: Warning, status: Warning['status'], rev: number): Promise<void> {
    await this.records.put(project, warning.uuid, { ...warning, status }, rev);
  }

  async remove(project: string, uuid: string): Promise<void> {
    await this.records.delete(project, uuid);
  }

  async list(project?: string): Promise<Warning[]> {
    return (await this.records.list(project)).map((r) => r.doc);
  }
}
