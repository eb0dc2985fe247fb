/** Checks of the JSON shapes clients send for instances (config maps, device maps, profile lists). */
import Joi from 'joi';
import { badRequest, bodyShape, objectBody, stringMap, type DeviceConfig } from '../../sdk/index.js';

export { optionalBool, optionalString, stringMap } from '../../sdk/index.js';

export function deviceMap(value: unknown): Record<string, DeviceConfig> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw badRequest('"devices" must be a map of devices');
  const out: Record<string, DeviceConfig> = {};
  for (const [name, dev] of Object.entries(value)) out[name] = stringMap(dev, `devices.${name}`);
  return out;
}

export function profileList(value: unknown): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.some((p) => typeof p !== 'string')) throw badRequest('"profiles" must be a list of profile names');
  if (new Set(value).size !== value.length) throw badRequest('"profiles" lists a profile twice');
  return value as string[];
}

/** The fields an instance's PUT (and PATCH) may carry. */
const editFields = {
  architecture: bodyShape.text,
  config: bodyShape.config,
  devices: bodyShape.devices,
  ephemeral: bodyShape.flag,
  profiles: bodyShape.names,
  description: bodyShape.text,
  restore: bodyShape.text,
  stateful: bodyShape.flag,
};

export const instanceEditBody = objectBody(editFields);

/** `source` of a create request: the fields each source type reads. */
const sourceShape = Joi.object({
  type: bodyShape.text,
  alias: bodyShape.text,
  fingerprint: bodyShape.text,
  properties: bodyShape.config,
  server: bodyShape.text,
  protocol: bodyShape.text,
  secret: bodyShape.text,
  certificate: bodyShape.text,
  mode: bodyShape.text,
  source: bodyShape.text,
  project: bodyShape.text,
  operation: bodyShape.text,
  websockets: bodyShape.config,
  'base-image': bodyShape.text,
  live: bodyShape.flag,
  instance_only: bodyShape.flag,
  container_only: bodyShape.flag,
  refresh: bodyShape.flag,
  allow_inconsistent: bodyShape.flag,
}).unknown(true).allow(null);

export const instanceCreateBody = objectBody({
  ...editFields,
  name: bodyShape.text,
  type: bodyShape.text,
  instance_type: bodyShape.text,
  source: sourceShape,
});

/** POST /1.0/instances/{name}: rename, or move to a pool or project. */
export const instanceMoveBody = objectBody({
  name: bodyShape.text,
  pool: bodyShape.text,
  project: bodyShape.text,
  // A cluster member's name, or a push-mode migration's target (operation, certificate, secrets).
  target: Joi.alternatives(bodyShape.text, bodyShape.object),
  migration: bodyShape.flag,
  live: bodyShape.flag,
  instance_only: bodyShape.flag,
  container_only: bodyShape.flag,
});

/** PUT /1.0/instances/{name}/state: a state change. */
export const stateChangeBody = objectBody({
  action: bodyShape.text, timeout: Joi.number().integer().allow(null), force: bodyShape.flag, stateful: bodyShape.flag,
});

/** POST /1.0/instances/{name}/console. */
export const consoleBody = objectBody({ type: bodyShape.text, width: Joi.number().integer().allow(null), height: Joi.number().integer().allow(null) });

/** POST .../exec: flags are booleans and the environment is text, as the reference decodes them. */
export const execBody = objectBody({
  command: Joi.array().items(Joi.string()).allow(null),
  environment: bodyShape.config,
  'wait-for-websocket': bodyShape.flag,
  'record-output': bodyShape.flag,
  interactive: bodyShape.flag,
  width: Joi.number().integer().allow(null),
  height: Joi.number().integer().allow(null),
  user: Joi.number().integer().allow(null),
  group: Joi.number().integer().allow(null),
  cwd: bodyShape.text,
});

/** PUT /1.0/instances: a state change for all of them. */
export const bulkStateBody = objectBody({ state: bodyShape.object });

/** Snapshot create, edit and rename. */
export const snapshotCreateBody = objectBody({ name: bodyShape.text, stateful: bodyShape.flag, expires_at: bodyShape.text });
export const snapshotEditBody = objectBody({ expires_at: bodyShape.text });
/** POST /1.0/instances/{name}/snapshots/{snapshot}: rename, or a migration source (`target`: a push-mode target). */
export const snapshotMoveBody = objectBody({ name: bodyShape.text, migration: bodyShape.flag, live: bodyShape.flag, target: bodyShape.object });
