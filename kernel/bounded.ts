/**
 * A wait with a bound, for the shutdown path: a step that hangs (a client holding a connection, a
 * lock held by stuck work) is given up on after `ms`, with a warning, and shutdown goes on.
 */
export async function withinBound(step: string, ms: number, work: () => Promise<unknown>, onOverrun: (step: string, ms: number) => void): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const overrun = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      onOverrun(step, ms);
      resolve();
    }, ms);
  });
  try {
    await Promise.race([Promise.resolve().then(work), overrun]);
  } finally {
    clearTimeout(timer);
  }
}
