/**
 * Option checks shared by the unix device types: a 400 naming the option, numbers in range, an
 * octal mode; and the owner and mode a node gets inside.
 */
import { badRequest, isUint } from '../../sdk/index.js';

/** uid/gid: 32 bits, without the "no id" value. */
export const MAX_ID = 4294967294;

export function option(name: string, check: () => void): void {
  try {
    check();
  } catch (err) {
    throw badRequest(`Invalid value for device option "${name}": ${(err as Error).message}`);
  }
}

export function bounded(max: number): (v: string) => void {
  return (v) => {
    isUint(v);
    if (Number(v) > max) throw new Error(`"${v}" is out of range (0 to ${max})`);
  };
}

export function isMode(v: string): void {
  if (!/^0?[0-7]{3,4}$/.test(v)) throw new Error(`"${v}" is not an octal file mode (such as 0660)`);
}

/** uid, gid and mode, checked when present. */
export function checkOwnerAndMode(config: Record<string, string>): void {
  if (config.uid !== undefined) option('uid', () => bounded(MAX_ID)(config.uid!));
  if (config.gid !== undefined) option('gid', () => bounded(MAX_ID)(config.gid!));
  if (config.mode !== undefined) option('mode', () => isMode(config.mode!));
}

/** The mode a node gets inside (0660 unless set). */
export function nodeMode(config: Record<string, string>): number {
  return config.mode !== undefined ? parseInt(config.mode, 8) : 0o660;
}
