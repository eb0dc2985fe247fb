/**
 * The policy gate's decisions, as pure functions of the project's config and contents:
 * `vetProposal` for a change the families are about to make, `vetProjectConfig` for a change
 * of the project's own config (a limit below what is already used, a restriction that existing
 * instances or profiles break).
 */
import { ApiError, truthy, type InstanceProposal, type ProfileProposal, type ProjectProposal, type VolumeProposal } from '../../../sdk/index.js';
import { expand, type InstanceEntry, type ProjectContents } from './contents.js';
import {
  aggregateTotal, checkAggregates, checkCounts, COUNT_LIMITS, countOf, limitValue, setAggregates, showAmount, type AggregateLimit,
} from './limits.js';
import { checkRestrictions, isRestricted, restriction, type ProjectConfig } from './restrictions.js';

const ACTIONS: Record<InstanceProposal['action'], string> = {
  create: 'Creating', update: 'Updating', copy: 'Copying to', move: 'Moving in', import: 'Importing',
};

/** Throws an ApiError (400, or 403 for an action the project forbids outright) when the proposal is refused. */
export function vetProposal(project: string, config: ProjectConfig, contents: ProjectContents, proposal: ProjectProposal): void {
  switch (proposal.kind) {
    case 'instance':
      return vetInstance(project, config, contents, proposal);
    case 'profile':
      return vetProfile(project, config, contents, proposal);
    case 'snapshot':
    case 'backup': {
      const key = `restricted.${proposal.kind}s`;
      if (isRestricted(config) && restriction(config, key) !== 'allow') {
        throw new ApiError(403, `Project "${project}" doesn't allow ${proposal.kind}s of its instances (${key}=${restriction(config, key)})`);
      }
      return;
    }
    case 'volume':
      return vetVolume(project, config, contents, proposal);
  }
}

function vetInstance(project: string, config: ProjectConfig, contents: ProjectContents, p: InstanceProposal): void {
  if (p.target !== undefined && isRestricted(config) && restriction(config, 'restricted.cluster.target') !== 'allow') {
    throw new ApiError(403, `Project "${project}" doesn't allow choosing the cluster member of an instance (restricted.cluster.target=${restriction(config, 'restricted.cluster.target')})`);
  }
  checkRestrictions(project, config, { kind: 'instance', name: p.name, type: p.type, config: p.config, devices: p.devices });
  const replaced = p.replaces ?? (p.action === 'update' ? p.name : undefined);
  const others = replaced === undefined ? contents.instances : contents.instances.filter((i) => i.name !== replaced);
  const change = `${ACTIONS[p.action]} instance "${p.name}"`;
  if (replaced === undefined) checkCounts(project, config, others, p.type, change);
  if (!setAggregates(config).length) return;
  const entry: InstanceEntry = { name: p.name, type: p.type, config: p.config, devices: p.devices, profiles: [], own: { config: p.config, devices: p.devices } };
  checkAggregates(project, config, { ...contents, instances: [...others, entry] }, change);
}

/** A profile's own content, then every instance using it as it would expand with the new content. */
function vetProfile(project: string, config: ProjectConfig, contents: ProjectContents, p: ProfileProposal): void {
  checkRestrictions(project, config, { kind: 'profile', name: p.name, type: 'any', config: p.config, devices: p.devices });
  const users = contents.instances.filter((i) => i.profiles.includes(p.name));
  if (!users.length) return;
  const profiles = new Map(contents.profiles.map((prof) => [prof.name, prof]));
  profiles.set(p.name, { name: p.name, config: p.config, devices: p.devices });
  const reexpanded = contents.instances.map((inst) => {
    if (!inst.profiles.includes(p.name)) return inst;
    const { config: c, devices } = expand(inst.profiles.map((n) => profiles.get(n)).filter((x) => x !== undefined), inst.own);
    return { ...inst, config: c, devices };
  });
  for (const inst of reexpanded) {
    if (inst.profiles.includes(p.name)) checkRestrictions(project, config, { kind: 'instance', name: inst.name, type: inst.type, config: inst.config, devices: inst.devices });
  }
  checkAggregates(project, config, { ...contents, instances: reexpanded }, `Changing profile "${p.name}"`);
}

function vetVolume(project: string, config: ProjectConfig, contents: ProjectContents, p: VolumeProposal): void {
  if (!config['limits.disk']) return;
  const volumes = contents.volumes.filter((v) => !(v.pool === p.pool && v.name === p.name));
  volumes.push({ pool: p.pool, name: p.name, size: p.size === undefined ? undefined : String(p.size) });
  checkAggregates(project, { 'limits.disk': config['limits.disk'] }, { ...contents, volumes }, `Creating volume "${p.name}"`);
}

/**
 * A change of the project's config, given what the project holds now. Only the keys that change
 * are weighed, so an edit of something else never fails on an old state.
 */
export function vetProjectConfig(project: string, before: ProjectConfig, after: ProjectConfig, contents: ProjectContents): void {
  const changed = (key: string) => (before[key] ?? '') !== (after[key] ?? '');
  if (truthy(after.restricted) && !truthy(after['features.profiles'])) {
    throw new ApiError(400, `Project "${project}" can only be restricted when it has its own profiles (features.profiles=true)`);
  }
  const tooLow = (key: string, detail: string) => new ApiError(400, `${key} of project "${project}" can't be ${after[key]}: ${detail}`);
  const parsed = (key: string): number => {
    try {
      return limitValue(key, after[key]!);
    } catch (err) {
      throw new ApiError(400, `Invalid ${key} "${after[key]}": ${(err as Error).message}`);
    }
  };
  for (const key of Object.keys(COUNT_LIMITS)) {
    if (!after[key] || !changed(key)) continue;
    const current = countOf(contents.instances, key);
    const what = key === 'limits.instances' ? 'instances' : key === 'limits.containers' ? 'containers' : 'virtual machines';
    if (current > parsed(key)) throw tooLow(key, `it already has ${current} ${what}`);
  }
  if (after['limits.networks'] && changed('limits.networks') && contents.networks > parsed('limits.networks')) {
    throw tooLow('limits.networks', `it already has ${contents.networks} networks`);
  }
  for (const key of setAggregates(after).filter(changed) as AggregateLimit[]) {
    const max = parsed(key);
    const total = aggregateTotal(project, contents, key);
    if (total > max) throw tooLow(key, `its instances${key === 'limits.disk' ? ' and volumes' : ''} already use ${showAmount(key, total)}`);
  }
  const restrictionsChanged = Object.keys({ ...before, ...after }).some((k) => (k === 'restricted' || k.startsWith('restricted.')) && changed(k));
  if (!isRestricted(after) || !restrictionsChanged) return;
  try {
    for (const prof of contents.profiles) checkRestrictions(project, after, { kind: 'profile', name: prof.name, type: 'any', config: prof.config, devices: prof.devices });
    for (const inst of contents.instances) checkRestrictions(project, after, { kind: 'instance', name: inst.name, type: inst.type, config: inst.config, devices: inst.devices });
  } catch (err) {
    if (err instanceof ApiError) throw new ApiError(400, `The new restrictions of project "${project}" conflict with what it holds: ${err.message}`);
    throw err;
  }
}
