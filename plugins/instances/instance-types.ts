/**
 * `instance_type` on creation: either `c<cpus>-m<GiB>` or a cloud type name, expanded to
 * limits.cpu and limits.memory. The names are a small built-in subset of the public cloud
 * catalogues the reference downloads; this daemon works offline.
 */
import { badRequest } from '../../sdk/index.js';

interface Size { cpu: number; memoryMiB: number }

const NAMED: Record<string, Size> = {
  't2.nano': { cpu: 1, memoryMiB: 512 },
  't2.micro': { cpu: 1, memoryMiB: 1024 },
  't2.small': { cpu: 1, memoryMiB: 2048 },
  't2.medium': { cpu: 2, memoryMiB: 4096 },
  't2.large': { cpu: 2, memoryMiB: 8192 },
  't2.xlarge': { cpu: 4, memoryMiB: 16384 },
  't2.2xlarge': { cpu: 8, memoryMiB: 32768 },
  'm4.large': { cpu: 2, memoryMiB: 8192 },
  'm4.xlarge': { cpu: 4, memoryMiB: 16384 },
  'c4.large': { cpu: 2, memoryMiB: 3840 },
  'c4.xlarge': { cpu: 4, memoryMiB: 7680 },
  'e2-micro': { cpu: 2, memoryMiB: 1024 },
  'e2-small': { cpu: 2, memoryMiB: 2048 },
  'e2-medium': { cpu: 2, memoryMiB: 4096 },
  'n1-standard-1': { cpu: 1, memoryMiB: 3840 },
  'n1-standard-2': { cpu: 2, memoryMiB: 7680 },
};

/** Limits for an instance type; the instance's own config wins over them. */
export function instanceTypeLimits(instanceType: string): Record<string, string> {
  const name = instanceType.includes(':') ? instanceType.slice(instanceType.lastIndexOf(':') + 1) : instanceType;
  const shorthand = /^c(\d+(?:\.\d+)?)-m(\d+(?:\.\d+)?)$/.exec(name);
  let size: Size | undefined;
  if (shorthand) size = { cpu: Math.ceil(Number(shorthand[1])), memoryMiB: Math.round(Number(shorthand[2]) * 1024) };
  else size = NAMED[name];
  if (!size || size.cpu < 1 || size.memoryMiB < 1) throw badRequest(`Unknown instance type "${instanceType}"`);
  return { 'limits.cpu': String(size.cpu), 'limits.memory': `${size.memoryMiB}MiB` };
}
