/** Operations not yet finished, followed from operation events (status codes below 200 are not final). */
import type { EventsService } from '../../sdk/index.js';

export class OperationsCount {
  private readonly open = new Set<string>();

  constructor(events: EventsService) {
    events.subscribe((event) => {
      const op = event.metadata as { id?: string; status_code?: number };
      if (typeof op.id !== 'string' || typeof op.status_code !== 'number') return;
      if (op.status_code < 200) this.open.add(op.id);
      else this.open.delete(op.id);
    }, ['operation']);
  }

  get running(): number {
    return this.open.size;
  }
}
