/** randomHex: CSPRNG bytes drawn from a pool (sdk/secrets.ts), each byte handed out once. */
import test from 'ava';
import { randomHex } from '../../sdk/index.js';

test('tokens have the length asked for, in hex, and never repeat across pool refills', (t) => {
  const seen = new Set<string>();
  // 4 KiB pools: 1,000 tokens of 32 bytes cross several refills, and a 5-byte draw leaves pools unaligned.
  for (let i = 0; i < 1000; i++) {
    const token = randomHex(32);
    t.regex(token, /^[0-9a-f]{64}$/);
    seen.add(token);
    t.regex(randomHex(5), /^[0-9a-f]{10}$/);
  }
  t.is(seen.size, 1000);
});

test('the bytes are spread as random bytes are: every value of a byte turns up', (t) => {
  const counts = new Array<number>(256).fill(0);
  for (let i = 0; i < 2000; i++) {
    const hex = randomHex(16);
    for (let k = 0; k < hex.length; k += 2) counts[parseInt(hex.slice(k, k + 2), 16)]!++;
  }
  // 32,000 bytes: ~125 of each value; a pool handed out twice or left zeroed would skew this far.
  t.true(counts.every((c) => c > 60 && c < 200), `byte counts from ${Math.min(...counts)} to ${Math.max(...counts)}`);
});

test('sizes outside 1 to 512 bytes are refused', (t) => {
  for (const bad of [0, -1, 1.5, 513, Number.NaN]) t.throws(() => randomHex(bad), { instanceOf: RangeError });
  t.is(randomHex(512).length, 1024);
});
