/**
 * Secrets (operation, token and image secrets alike): drawn from the CSPRNG in bulk (randomHex), and compared in
 * constant time, digests first, so neither content nor length shows in the timing.
 */
import { createHash, randomFillSync, timingSafeEqual } from 'node:crypto';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

export function sameSecret(held: string, given: string): boolean {
  return timingSafeEqual(digest(held), digest(given));
}

/**
 * Secrets held for a while and offered often (an operation's websocket secrets, one check per
 * connection and several per secret): each held one is digested once, an offered one once per lookup.
 */
export class HeldSecrets<T> {
  private readonly held: [Buffer, T][] = [];

  add(secret: string, value: T): void {
    this.held.push([digest(secret), value]);
  }

  /** The value of the secret offered, every held one compared (constant time whichever matches). */
  find(given: string): T | undefined {
    const offered = digest(given);
    let found: T | undefined;
    for (const [known, value] of this.held) if (timingSafeEqual(known, offered)) found = value;
    return found;
  }
}

/** Random bytes drawn in bulk: see randomHex. */
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let drawn = 0;

/**
 * `bytes` random bytes from the system's CSPRNG, hex-encoded (tokens, secrets, temporary names). A
 * request of a few bytes costs node's crypto about as much as one of 4 KiB (~0.1 ms each time in a
 * daemon that asks now and then, 20 times what a tight loop measures), and a start, an exec or a file
 * write asks for several: they are drawn from a pool filled 4 KiB at a time, each byte handed out once
 * and zeroed then.
 */
export function randomHex(bytes: number): string {
  if (!Number.isInteger(bytes) || bytes <= 0 || bytes > POOL_BYTES / 8) throw new RangeError(`randomHex takes 1 to ${POOL_BYTES / 8} bytes, not ${bytes}`);
  if (drawn + bytes > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafeSlow(POOL_BYTES));
    drawn = 0;
  }
  const hex = pool.toString('hex', drawn, drawn + bytes);
  pool.fill(0, drawn, drawn + bytes);
  drawn += bytes;
  return hex;
}
