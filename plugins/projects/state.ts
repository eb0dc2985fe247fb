/** GET /1.0/projects/<name>/state: each kind's current allocation and the project's limit (-1: none). */
import { parseSize, type ServiceRegistry } from '../../sdk/index.js';
import type { ProjectRecord } from './project.js';
import { ALLOCATION_KINDS, LIMIT_KEY, projectAllocations } from './usage.js';

export interface ResourceState {
  Limit: number;
  Usage: number;
}

function limitOf(kind: string, value: string | undefined): number {
  if (!value) return -1;
  try {
    return kind === 'disk' || kind === 'memory' ? parseSize(value) : Number(value);
  } catch {
    return -1;
  }
}

export async function projectState(services: ServiceRegistry, project: ProjectRecord): Promise<{ resources: Record<string, ResourceState> }> {
  const usage = await projectAllocations(services, project.name);
  const resources: Record<string, ResourceState> = {};
  // Kinds in name order, as the reference lists them.
  for (const kind of [...ALLOCATION_KINDS].sort()) {
    resources[kind] = { Limit: limitOf(kind, project.config[LIMIT_KEY[kind]]), Usage: usage[kind] };
  }
  return { resources };
}
