/** Reading a raw request body so that an early refusal still reaches the client. */
import type { Readable } from 'node:stream';

/** The body's chunks; stopping early leaves the stream open (see `drain`). */
export function bodyChunks(body: NodeJS.ReadableStream): AsyncIterable<Buffer> {
  return (body as Readable).iterator({ destroyOnReturn: false });
}

/**
 * Read and discard what the client is still sending. HTTP clients write the whole body before
 * they read the answer, so an error sent mid-upload would otherwise never be seen.
 */
export async function drain(body: NodeJS.ReadableStream): Promise<void> {
  const stream = body as Readable;
  if (stream.readableEnded || stream.destroyed) return;
  await new Promise<void>((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', () => resolve());
    stream.resume();
  });
}

/** The client went away before the body was complete. */
export function interrupted(body: NodeJS.ReadableStream): boolean {
  const stream = body as Readable;
  return stream.destroyed && !stream.readableEnded;
}
