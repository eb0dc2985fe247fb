/**
 * `security.protection.shift`: the instance's files must keep the owners they were last used with.
 * The rootfs here is mounted idmapped and never rewritten, but the owners the container sees still
 * follow its map, so a start under another map than the last one (the first start of an
 * unprivileged container from an image's unmapped files, a privilege change, a new raw.idmap or
 * isolated range) is what the reference refuses as a shift, and so is it here.
 */
import { badRequest, truthy } from '../../sdk/index.js';
import { idmapLines, parseIdmapJson, type IdmapEntry, type IdmapPlan } from './idmap.js';

export function refuseShift(config: Record<string, string>, plan: IdmapPlan): void {
  if (!truthy(config['security.protection.shift'])) return;
  // Never started: the files are as the image or copy left them, unmapped.
  const last = parseIdmapJson(config['volatile.idmap.current']) ?? [];
  if (sameMap(last, plan.map)) return;
  throw badRequest(`The instance is protected against id shifting (security.protection.shift=true): this start would use the id map ${describe(plan.map)} where its files were last used with ${describe(last)}`);
}

function key(map: IdmapEntry[]): string {
  return [...idmapLines(map)].sort().join(',');
}

function sameMap(a: IdmapEntry[], b: IdmapEntry[]): boolean {
  return key(a) === key(b);
}

function describe(map: IdmapEntry[]): string {
  return map.length ? `"${idmapLines(map).join(', ')}"` : 'none (host ids as they are)';
}
