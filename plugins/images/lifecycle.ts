/**
 * The images family's lifecycle events. They go to the project the client named, with that
 * project in the source URL, even where `features.images=false` keeps the images in `default`:
 * the reference files them so, and a client watching its own project sees its images change.
 * Work no request started (the image tasks) names its project itself.
 */
import { requestedProjectOf, type ApiRequest, type EventsService, type Requestor } from '../../sdk/index.js';

/** Who asked: a client's request, or the daemon's own task working in a project. */
export type ImageOrigin = ApiRequest | { readonly project: string; readonly requestor?: Requestor };

const isRequest = (origin: ImageOrigin): origin is ApiRequest => 'method' in origin;

export function imageLifecycle(
  events: EventsService, origin: ImageOrigin, action: string, source: (project: string) => string, context?: Record<string, unknown>,
): void {
  const project = isRequest(origin) ? requestedProjectOf(origin) : origin.project;
  events.lifecycle(action, source(project), { project, ...(origin.requestor ? { requestor: origin.requestor } : {}), ...(context ? { context } : {}) });
}
