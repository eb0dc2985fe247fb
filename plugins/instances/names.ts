/** Instance names are host names: the container's hostname is set from them. */
import { badRequest } from '../../sdk/index.js';

export function checkInstanceName(name: unknown): string {
  if (typeof name !== 'string' || name === '') throw badRequest('Instance name cannot be empty');
  if (name.length > 63) throw badRequest(`Instance name "${name}" is too long (maximum 63 characters)`);
  if (!/^[A-Za-z0-9-]+$/.test(name)) throw badRequest(`Instance name "${name}" may only contain ASCII letters, digits and dashes`);
  if (/^[-0-9]/.test(name)) throw badRequest(`Instance name "${name}" must start with a letter`);
  if (name.endsWith('-')) throw badRequest(`Instance name "${name}" must not end with a dash`);
  return name;
}

const ADJECTIVES = ['able', 'brave', 'calm', 'eager', 'fair', 'glad', 'keen', 'lucid', 'merry', 'noble', 'proud', 'quick', 'sharp', 'tidy', 'vivid', 'witty'];
const ANIMALS = ['badger', 'crane', 'dingo', 'egret', 'ferret', 'gecko', 'heron', 'ibis', 'koala', 'lemur', 'marten', 'newt', 'otter', 'puffin', 'quail', 'raven'];

/** A readable name for instances created without one. */
export function randomInstanceName(): string {
  const pick = (list: string[]) => list[Math.floor(Math.random() * list.length)];
  return `${pick(ADJECTIVES)}-${pick(ANIMALS)}`;
}
