/** Generated names and addresses of NICs: MAC addresses, host-side interface names, `ethN`. */
import { randomHex } from '../../sdk/index.js';

/** A MAC address in the range the reference uses for its instances (Xensource's OUI, locally held). */
export function generateHwaddr(): string {
  return `00:16:3e:${randomHex(3).match(/../g)!.join(':')}`;
}

/** A host-side veth name: a prefix and 8 random hex digits (fits the 15-character limit). */
export function generateHostName(prefix = 'veth'): string {
  return `${prefix}${randomHex(4)}`;
}

/** The first `ethN` not taken by another NIC of the instance. */
export function freeEthName(taken: string[]): string {
  for (let i = 0; ; i++) if (!taken.includes(`eth${i}`)) return `eth${i}`;
}

/** Linux interface names: 1 to 15 bytes, no slash, colon or white space, not `.` or `..`. */
export function checkInterfaceName(what: string, name: string): void {
  if (name.length === 0 || name.length > 15) throw new Error(`${what} "${name}" must be 1 to 15 characters long`);
  if (!/^[A-Za-z0-9_.@+-]+$/.test(name) || name === '.' || name === '..') throw new Error(`${what} "${name}" is not a valid interface name`);
}

export function checkHwaddr(value: string): void {
  if (!/^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$/.test(value)) throw new Error(`invalid MAC address "${value}"`);
  if (parseInt(value.slice(0, 2), 16) & 1) throw new Error(`"${value}" is a multicast MAC address`);
}
