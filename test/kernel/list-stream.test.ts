/** kernel/http/list-stream.ts: a large listing body read out in bounded slices, the same bytes in order. */
import test from 'ava';
import { partsLength, sliceStream } from '../../kernel/http/list-stream.js';

test('slices join to the parts in order, each slice bounded, one alive at a time', async (t) => {
  const parts = Array.from({ length: 20000 }, (_, i) => Buffer.from(`{"n":${i},"pad":"${'x'.repeat(i % 300)}"},`));
  const stream = sliceStream(parts);
  const slices: Buffer[] = [];
  for await (const slice of stream) slices.push(slice as Buffer);
  t.deepEqual(Buffer.concat(slices), Buffer.concat(parts));
  t.is(partsLength(parts), Buffer.concat(parts).length);
  t.true(slices.length > 1, 'more than one slice');
  // A slice stops at the first part that takes it to 1 MiB: never more than that and one part.
  for (const slice of slices) t.true(slice.length < 1024 * 1024 + 400, `a slice of ${slice.length} bytes`);
});

test('the next slice is joined only when the reader asks for it', async (t) => {
  const parts = Array.from({ length: 256 }, () => Buffer.alloc(64 * 1024, 1));
  const stream = sliceStream(parts);
  await new Promise((resolve) => stream.once('readable', resolve));
  // One slice read ahead (past the stream's 16 KiB mark, it stops): not the whole 16 MiB.
  t.true(stream.readableLength <= 1024 * 1024, `${stream.readableLength} bytes joined before any was read`);
  let total = 0;
  for await (const slice of stream) total += (slice as Buffer).length;
  t.is(total, 256 * 64 * 1024);
});

test('no parts is an empty body', async (t) => {
  const chunks: Buffer[] = [];
  for await (const slice of sliceStream([])) chunks.push(slice as Buffer);
  t.is(Buffer.concat(chunks).length, 0);
});
