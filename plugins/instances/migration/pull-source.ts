/**
 * Where the other end of a migration is: the `source` of `POST /1.0/instances` with `type: migration`
 * (pull: the source's operation, the certificate it must present, the secrets it handed its client;
 * push: only the flags), and the `target` object of a push-mode `POST /1.0/instances/<name>`.
 */
import { badRequest } from '../../../sdk/index.js';

export interface PullSource {
  /** https URL of the source's operation. */
  operation: URL;
  certificate: string;
  secrets: { control: string; fs: string };
  instanceOnly: boolean;
}

const text = (v: unknown): v is string => typeof v === 'string' && v !== '';

function commonChecks(source: Record<string, any>): void {
  if (source.live === true) throw badRequest('Live migration is not supported by this build');
}

/** Push mode: the source will connect to this target's operation; only the flags matter here. */
export function pushSource(source: Record<string, any>): { instanceOnly: boolean } {
  commonChecks(source);
  return { instanceOnly: source.instance_only === true || source.container_only === true };
}

/** The `target` of a push-mode source request: the target's operation, certificate and secrets. */
export function pushTarget(target: Record<string, any>): PullSource {
  return pullSource({ mode: 'pull', operation: target.operation, certificate: target.certificate, secrets: target.secrets });
}

export function pullSource(source: Record<string, any>): PullSource {
  const mode = source.mode ?? 'pull';
  if (mode !== 'pull') throw badRequest(`Migration mode "${mode}" is not supported; use pull or push`);
  commonChecks(source);
  if (!text(source.operation)) throw badRequest('A migration source needs "operation" (the URL of the source\'s migration operation)');
  let operation: URL;
  try {
    operation = new URL(source.operation);
  } catch {
    throw badRequest(`Invalid migration operation URL "${source.operation}"`);
  }
  if (operation.protocol !== 'https:' || !/^\/1\.0\/operations\/[^/]+$/.test(operation.pathname)) {
    throw badRequest('The migration operation must be an https URL of the form https://<host>/1.0/operations/<id>');
  }
  if (!text(source.certificate) || !source.certificate.includes('BEGIN CERTIFICATE')) throw badRequest('A migration source needs the source server\'s "certificate" (PEM)');
  const secrets = source.secrets;
  if (!secrets || typeof secrets !== 'object' || !text(secrets.control) || !text(secrets.fs)) {
    throw badRequest('A migration source needs "secrets" with the "control" and "fs" websocket secrets');
  }
  if (secrets.criu) throw badRequest('The source offers live state (a "criu" secret), which this build does not take');
  const instanceOnly = source.instance_only === true || source.container_only === true;
  return { operation, certificate: source.certificate, secrets: { control: secrets.control, fs: secrets.fs }, instanceOnly };
}
