/** PATCH merge semantics shared by every resource. */

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Merge a PATCH body into the current content: top-level fields sent replace their current value,
 * except maps (`config`, `devices` and the like) which are merged key by key, one level down.
 * Fields not sent are kept. Setting a config key to "" leaves it to the PUT handler to unset.
 */
export function mergePatch<T extends Record<string, unknown>>(current: T, patch: unknown): T {
  if (!isPlainObject(patch)) return current;
  const out: Record<string, unknown> = { ...current };
  for (const [field, value] of Object.entries(patch)) {
    const before = current[field];
    out[field] = isPlainObject(before) && isPlainObject(value) ? { ...before, ...value } : value;
  }
  return out as T;
}
