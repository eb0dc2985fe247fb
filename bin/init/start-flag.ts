/**
 * `corrald --init auto|<preseed.yaml>|-`: the preseed is read and checked before the daemon
 * starts (a mistake stops it before anything changes); it is applied once the daemon serves.
 */
import { type ApiCall } from './api.js';
import { applyPreseed } from './apply.js';
import { autoPreseed, networkChoice } from './auto.js';
import { readPreseed } from './preseed.js';

export const INIT_USAGE = `  --init       once started, apply a preseed: "auto" (when missing: a dir pool named default with a
               root disk in the default profile, and a bridge corralbr0 with an eth0 NIC in the default
               profile; CORRAL_INIT_NETWORK=none skips the bridge, CORRAL_INIT_NETWORK=<name> names it),
               a preseed YAML file, or - for stdin. When it fails, what it applied is undone and the
               daemon stops with exit status 1`;

export type InitStep = (api: ApiCall) => Promise<void>;

export async function initStep(source: string, env: NodeJS.ProcessEnv): Promise<InitStep> {
  if (source === 'auto') {
    const choice = networkChoice(env);
    return async (api) => applyPreseed(api, await autoPreseed(api, choice));
  }
  const preseed = await readPreseed(source);
  return (api) => applyPreseed(api, preseed);
}
