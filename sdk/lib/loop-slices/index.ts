/**
 * Long walks over every instance (a boot's adoption of thousands) made of awaits that resolve at once
 * never leave the microtask queue: no socket is read and no timer fires until they end. A walk awaits
 * `between()` between items, which gives the event loop one turn once a slice of its time has gone.
 */
export class LoopSlices {
  private sliceStart = performance.now();

  constructor(private readonly sliceMs = 10) {}

  async between(): Promise<void> {
    if (performance.now() - this.sliceStart < this.sliceMs) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.sliceStart = performance.now();
  }
}
