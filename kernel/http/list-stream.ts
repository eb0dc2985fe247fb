/**
 * A listing body too large to join whole, read out in slices as the socket takes them. Joining the
 * fragments of 10,000 instances makes a 13–15 MB Buffer per request, held until the client has read
 * it all and freed only when V8 next collects its owner: a few listings at once were tens of MiB of
 * the daemon's resident memory at its busiest. A slice is joined when the response asks for more,
 * so one or two are alive at a time; the bytes sent are the same.
 */
import { Readable } from 'node:stream';

/** Small against the listings it serves; large enough that sending one costs no more turns of the loop than a whole body did (256 KiB cost ~10%). */
const SLICE_BYTES = 1024 * 1024;

export function sliceStream(parts: readonly Buffer[]): Readable {
  let next = 0;
  return new Readable({
    read() {
      const slice: Buffer[] = [];
      let size = 0;
      while (next < parts.length && size < SLICE_BYTES) {
        const part = parts[next++]!;
        slice.push(part);
        size += part.length;
      }
      this.push(slice.length ? Buffer.concat(slice, size) : null);
    },
  });
}

export const partsLength = (parts: readonly Buffer[]): number => parts.reduce((sum, part) => sum + part.length, 0);
