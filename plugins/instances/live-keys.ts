/** Which config changes a running instance takes at once (the driver applies them, e.g. to its cgroup). */
export function liveChanges(before: Record<string, string>, after: Record<string, string>): Record<string, string | undefined> {
  const changed: Record<string, string | undefined> = {};
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (key.startsWith('limits.') && before[key] !== after[key]) changed[key] = after[key];
  }
  return changed;
}
