/** Warnings: the kernel and plugins raise them through this service; the warnings plugin stores and serves them. */
import { createServiceRef } from './services.js';

export type WarningSeverity = 'low' | 'moderate' | 'high';

export interface WarningInput {
  /** A stable, human-readable kind, e.g. "Couldn't find the CGroup memory controller". */
  type: string;
  message: string;
  project?: string;
  severity?: WarningSeverity;
  /** URL of the entity the warning is about. */
  entityUrl?: string;
}

export interface WarningsService {
  /** Record a warning; the same type and entity raised again bumps its count. */
  raise(warning: WarningInput): Promise<void>;
  /** Mark warnings of a type (and entity) resolved. */
  resolve(type: string, entityUrl?: string): Promise<void>;
}

export const WarningsServiceRef = createServiceRef<WarningsService>('warnings');
