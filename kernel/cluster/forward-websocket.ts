/**
 * Two websockets joined frame for frame: text stays text, binary stays binary, a close (with its code
 * and reason) is passed on, and an abrupt end on one side ends the other. A side that reads slower
 * than the other writes holds the writer back instead of queueing without bound.
 */
import type WebSocket from 'ws';

/** Queued bytes above which the sender is paused, and below which it resumes. */
const HIGH_WATER = 4 * 1024 * 1024;
const LOW_WATER = 1024 * 1024;

/** `a` and `b` may come paused (nothing read before they are joined); they are resumed here. */
export function bridgeWebsockets(a: WebSocket, b: WebSocket): void {
  pipe(a, b);
  pipe(b, a);
  a.resume();
  b.resume();
}

function pipe(from: WebSocket, to: WebSocket): void {
  let paused = false;
  from.on('message', (data, isBinary) => {
    if (to.readyState !== to.OPEN) return;
    to.send(data, { binary: isBinary }, () => {
      if (paused && to.bufferedAmount < LOW_WATER) {
        paused = false;
        from.resume();
      }
    });
    if (!paused && to.bufferedAmount > HIGH_WATER) {
      paused = true;
      from.pause();
    }
  });
  from.on('close', (code, reason) => {
    if (to.readyState === to.CLOSED || to.readyState === to.CLOSING) return;
    // 1005 (no code sent) and 1006 (no close frame) cannot be sent: an abrupt end is passed on as one.
    if (code === 1006) to.terminate();
    else if (code === 1005) to.close();
    else to.close(code, reason);
  });
  from.on('error', () => to.terminate());
}
