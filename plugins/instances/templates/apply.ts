/**
 * Applying an instance's image templates for a trigger (create, copy, start, rename): each
 * template whose `when` names the trigger is rendered and written into the container root.
 * Targets come from untrusted images, so every write goes through the confined root-fs module.
 */
import path from 'node:path';
import { ApiError, isApiError, truthy, type ErrorStatus } from '../../../sdk/index.js';
import type { InstanceHandle } from '../access.js';
import { mkdirInRoot, statInRoot, writeFileInRoot, RootFsError } from '../files/root-fs.js';
import { ownerOf, readMetadata, type InstanceMetadata, type TemplateSpec } from './metadata-file.js';
import { readTemplate } from './template-files.js';
import { renderTemplate, TemplateError, type TemplateContext } from './render.js';

export type TemplateTrigger = 'create' | 'copy' | 'start' | 'rename';

/** What a template sees, as the reference gives it; `container` and `instance` are the same map. */
export function templateContext(handle: InstanceHandle, trigger: TemplateTrigger, target: string, properties: Record<string, string>): TemplateContext {
  const config = { ...handle.inst.config };
  const instance = {
    name: handle.name,
    type: handle.record.type,
    architecture: handle.record.architecture,
    privileged: truthy(config['security.privileged']) ? 'true' : 'false',
    ephemeral: handle.record.ephemeral ? 'true' : 'false',
  };
  return {
    trigger,
    path: target,
    container: instance,
    instance,
    config,
    devices: structuredClone(handle.inst.devices),
    properties: { ...properties },
    // Unset keys give the default; set keys (even empty) give their value.
    config_get: (key: unknown, fallback: unknown) => (Object.hasOwn(config, String(key)) ? config[String(key)] : fallback),
  };
}

/** Write, creating missing parent directories (root-owned 0755) inside the root. */
async function writeCreatingParents(root: string, target: string, data: Buffer, owner: { uid: number; gid: number; mode: number }): Promise<void> {
  try {
    await writeFileInRoot(root, target, data, owner);
  } catch (err) {
    if (!(err instanceof RootFsError) || err.code !== 'ENOENT') throw err;
    await mkdirInRoot(root, path.posix.dirname(target), { uid: 0, gid: 0, mode: 0o755, parents: true });
    await writeFileInRoot(root, target, data, owner);
  }
}

async function applyOne(handle: InstanceHandle, trigger: TemplateTrigger, target: string, spec: TemplateSpec): Promise<void> {
  if (!spec.template) throw new TemplateError('no template file is named');
  const owner = ownerOf(spec, target);
  if (spec.create_only && (await statInRoot(handle.rootfs, target))) return;
  const source = (await readTemplate(handle.inst.volumePath, spec.template)).toString('utf8');
  const output = renderTemplate(source, templateContext(handle, trigger, target, spec.properties ?? {}));
  await writeCreatingParents(handle.rootfs, target, Buffer.from(output), owner);
}

/**
 * Render the templates of `trigger`. `metadata`, when given, is the instance's metadata.yaml as the
 * caller read it already (a first start renders two triggers from one read).
 */
export async function applyTemplates(handle: InstanceHandle, trigger: TemplateTrigger, metadata?: InstanceMetadata): Promise<void> {
  // A virtual machine's root is a disk image, not a directory the host can write into.
  if (handle.record.type !== 'container') return;
  metadata ??= await readMetadata(handle.inst.volumePath);
  const due = Object.entries(metadata.templates ?? {})
    .filter(([, spec]) => spec.when?.includes(trigger))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [target, spec] of due) {
    try {
      await applyOne(handle, trigger, target, spec);
    } catch (err) {
      // The image's fault (bad template, bad target) is the client's; anything else is ours.
      const status: ErrorStatus = err instanceof TemplateError || err instanceof RootFsError ? 400
        : isApiError(err) ? (err.status === 404 ? 400 : err.status) : 500;
      throw new ApiError(status, `Failed to apply template "${spec.template}" to "${target}" (${trigger}): ${(err as Error).message}`);
    }
  }
}
