/** Value validators for config keys. Each throws an Error with a message naming the problem. */

export type Validator = (value: string) => void;

export const isBool: Validator = (v) => {
  if (!['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'].includes(v.toLowerCase())) throw new Error(`Invalid value for a boolean "${v}"`);
};

export const isInt: Validator = (v) => {
  if (!/^-?\d+$/.test(v)) throw new Error(`Invalid value for an integer "${v}"`);
};

export const isUint: Validator = (v) => {
  if (!/^\d+$/.test(v)) throw new Error(`Invalid value for a positive integer "${v}"`);
};

export function oneOf(...choices: string[]): Validator {
  return (v) => {
    if (!choices.includes(v)) throw new Error(`Invalid value "${v}" (must be one of ${choices.join(', ')})`);
  };
}

/** A listen address: `host`, `host:port`, `[v6]:port` or `:port`. */
export const isListenAddress: Validator = (v) => {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*))(?::(\d{1,5}))?$/.exec(v);
  if (!m || (m[3] !== undefined && Number(m[3]) > 65535)) throw new Error(`Invalid listen address "${v}"`);
};

/** Truthy reading of a stored boolean value. */
export const truthy = (v: string | undefined): boolean => ['true', '1', 'yes', 'on'].includes((v ?? '').toLowerCase());
