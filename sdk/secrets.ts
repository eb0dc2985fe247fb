/** Secrets compared in constant time (operation, token and image secrets alike): digests first, so neither content nor length shows in the timing. */
import { createHash, timingSafeEqual } from 'node:crypto';

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
