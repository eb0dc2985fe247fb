/**
 * The images family's lifecycle events. They go to the project the client named, with that
 * project in the source URL, even where `features.images=false` keeps the images in `default`:
 * the reference files them so, and a client watching its own project sees its images change.
 */
import { requestedProjectOf, type ApiRequest, type EventsService } from '../../sdk/index.js';

export function imageLifecycle(
  events: EventsService, req: ApiRequest, action: string, source: (project: string) => string, context?: Record<string, unknown>,
): void {
  const project = requestedProjectOf(req);
  events.lifecycle(action, source(project), { project, requestor: req.requestor, ...(context ? { context } : {}) });
}
