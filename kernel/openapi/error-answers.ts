/**
 * The error statuses one method of a route can answer: those the kernel's pipeline answers by itself
 * (pipeline.ts, request-body.ts), and those the route's descriptor declares its handler answers.
 */
import type { ErrorStatus, VerbSpec } from '../../sdk/index.js';

export interface AnsweringMethod {
  readonly verb: 'get' | 'put' | 'patch' | 'post' | 'delete' | 'websocket';
  readonly access: string;
  readonly spec?: VerbSpec;
  /** The path names an object (`{name}`): one that does not exist is a 404. */
  readonly namesObject: boolean;
  /** The route checks If-Match against its `current` content. */
  readonly checksIfMatch: boolean;
}

export interface PipelineFacts {
  /** A plugin checks `?project=` names (unknown project: 404). */
  readonly projectsChecked: boolean;
  /** The build can form a cluster: any request may meet an unreachable member or a lost quorum (503). */
  readonly clusterable?: boolean;
}

export function errorStatuses(method: AnsweringMethod, facts: PipelineFacts): ErrorStatus[] {
  const codes = new Set<ErrorStatus>([
    // Always possible: a malformed `project`, `target`, `recursion` or `filter`, a query or body of the wrong shape.
    400,
    // Whatever goes wrong on the server's side.
    500,
  ]);
  if (method.access !== 'untrusted') codes.add(403);
  if (method.namesObject || facts.projectsChecked) codes.add(404);
  if (method.checksIfMatch && (method.verb === 'put' || method.verb === 'patch')) codes.add(412);
  if (facts.clusterable) codes.add(503);
  for (const code of method.spec?.errors ?? []) codes.add(code);
  return [...codes].sort((a, b) => a - b);
}
