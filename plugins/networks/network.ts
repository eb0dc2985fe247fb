/** The stored network record and how the API shows managed and unmanaged networks. */
import type { NetworkInfo } from '../../sdk/index.js';

export interface NetworkRecord {
  name: string;
  type: string;
  description: string;
  config: Record<string, string>;
}

export type NetworkStatus = 'Created' | 'Unavailable';

export const networkInfo = (project: string, rec: NetworkRecord): NetworkInfo => ({
  project, name: rec.name, type: rec.type, description: rec.description, config: { ...rec.config },
});

/** What PUT replaces and the ETag is computed from. */
export const editableView = (rec: NetworkRecord) => ({ config: rec.config, description: rec.description });

/** Field order as the reference answers. */
export function managedView(rec: NetworkRecord, status: NetworkStatus, usedBy: string[]) {
  return {
    config: rec.config,
    description: rec.description,
    name: rec.name,
    type: rec.type,
    used_by: usedBy,
    managed: true,
    status,
    locations: ['none'],
  };
}

export function unmanagedView(name: string, type: string, usedBy: string[]) {
  return { config: {}, description: '', name, type, used_by: usedBy, managed: false, status: '', locations: null };
}
