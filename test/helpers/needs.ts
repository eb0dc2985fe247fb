/**
 * Tests that need a host tool are decided at load time: with the tool they are ordinary serial
 * tests, without it ava lists them as skipped, the reason in the title and on stderr, rather than
 * passing having checked nothing.
 */
import test, { type Implementation } from 'ava';
import { hasLxc } from './clients.js';

export type SerialTest = (title: string, implementation: Implementation<[]>) => void;

/** `test.serial` when `missing` is undefined; otherwise a skip that says why. */
export function serialUnless(missing: string | undefined): SerialTest {
  if (missing === undefined) return (title, implementation) => test.serial(title, implementation);
  console.warn(`Skipping tests: ${missing}`);
  return (title, implementation) => test.skip(`${title} (skipped: ${missing})`, implementation);
}

/** Serial tests that drive the `lxc` client. */
export const withLxcClient = (): SerialTest => serialUnless(hasLxc() ? undefined : 'the lxc client is not installed');
