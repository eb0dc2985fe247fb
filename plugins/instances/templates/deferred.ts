/**
 * Templates deferred to the next start (`volatile.apply_template`), as the reference defers them:
 * a create, copy or rename only records its trigger; the start renders that trigger's templates,
 * clears the key, then renders the `start` templates. A start that fails while rendering the
 * deferred templates leaves the key, so the next start tries again.
 */
import type { InstanceHandle } from '../access.js';
import type { FamilyHooks } from '../hooks.js';
import type { TemplateTrigger } from './apply.js';
import { readMetadata, type InstanceMetadata } from './metadata-file.js';

export const APPLY_TEMPLATE_KEY = 'volatile.apply_template';

/** Record a trigger, unless one is already waiting (a rename before the first start still owes `create`). */
export function deferTemplates(config: Record<string, string>, trigger: TemplateTrigger): void {
  if (!config[APPLY_TEMPLATE_KEY]) config[APPLY_TEMPLATE_KEY] = trigger;
}

/** A restore takes the snapshot's pending trigger, or its absence, with the snapshot's files. */
export function restoreDeferred(config: Record<string, string>, snapshotConfig: Record<string, string>): void {
  const pending = snapshotConfig[APPLY_TEMPLATE_KEY];
  if (pending) config[APPLY_TEMPLATE_KEY] = pending;
  else delete config[APPLY_TEMPLATE_KEY];
}

export interface TemplateHost {
  applyTemplates(handle: InstanceHandle, trigger: TemplateTrigger, metadata?: InstanceMetadata): Promise<void>;
  touch(project: string, name: string, change: (record: InstanceHandle['record']) => void): Promise<void>;
}

/** What a start renders before the instance runs: the deferred trigger's templates, then the start ones. */
export async function applyStartTemplates(host: TemplateHost, handle: InstanceHandle): Promise<void> {
  const pending = handle.record.config[APPLY_TEMPLATE_KEY];
  // One read for both triggers: rendering templates writes into the root, never metadata.yaml.
  // A virtual machine's root is a disk image: no metadata.yaml, no templates.
  const metadata = handle.record.type === 'container' ? await readMetadata(handle.inst.volumePath) : undefined;
  if (pending) {
    // Any value is a trigger name; one no template names renders nothing and is cleared all the same.
    await host.applyTemplates(handle, pending as TemplateTrigger, metadata);
    await host.touch(handle.project, handle.name, (r) => {
      delete r.config[APPLY_TEMPLATE_KEY];
    });
    delete handle.record.config[APPLY_TEMPLATE_KEY];
    delete handle.inst.config[APPLY_TEMPLATE_KEY];
  }
  await host.applyTemplates(handle, 'start', metadata);
}

/** Templates follow the instances: triggers recorded on create, copy, rename and restore, rendered as a start launches. */
export function deferTemplatesOnChanges(hooks: FamilyHooks, host: TemplateHost): void {
  hooks.creating.tap('templates', (draft) => {
    // A backup import brings the files as they were: nothing is owed for it.
    if (draft.origin !== 'import') deferTemplates(draft.config, draft.origin);
  });
  // The rename that ends a move to another pool, and a move to another project, owe nothing (as in the reference).
  hooks.renaming.tap('templates', (rename) => {
    if (rename.cause === 'rename') deferTemplates(rename.config, 'rename');
  });
  hooks.restoring.tap('templates', (restore) => restoreDeferred(restore.config, restore.snapshotConfig));
  hooks.launching.tapPromise('templates', (handle) => applyStartTemplates(host, handle));
}
