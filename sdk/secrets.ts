/** Secrets compared in constant time (operation, token and image secrets alike): digests first, so neither content nor length shows in the timing. */
import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

export function sameSecret(held: string, given: string): boolean {
  return timingSafeEqual(digest(held), digest(given));
}
