/**
 * The trust password (`core.trust_password`) is kept as a salted scrypt hash and compared in
 * constant time; the clear text is never stored or logged.
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

const KEY_LENGTH = 64;
const COST = { N: 16384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };
const PREFIX = 'scrypt';

function derive(password: string, salt: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => scrypt(password, salt, KEY_LENGTH, COST, (err, key) => (err ? reject(err) : resolve(key))));
}

/** `scrypt$<salt hex>$<hash hex>`: what the config store keeps. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  return `${PREFIX}$${salt.toString('hex')}$${(await derive(password, salt)).toString('hex')}`;
}

export function isPasswordHash(stored: string): boolean {
  return /^scrypt\$[0-9a-f]{32}\$[0-9a-f]{128}$/.test(stored);
}

/** Whether `password` matches the stored hash. Both sides are 64-byte derived keys: the comparison takes the same time whatever the input. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  if (!isPasswordHash(stored)) return false;
  const [, saltHex, hashHex] = stored.split('$') as [string, string, string];
  const expected = Buffer.from(hashHex, 'hex');
  const offered = await derive(password, Buffer.from(saltHex, 'hex'));
  return offered.length === expected.length && timingSafeEqual(offered, expected);
}
