/**
 * The path of a request as the client sent it. URL parsers (WHATWG's, hapi's router) resolve `.` and
 * `..` segments, encoded or not, so `/1.0/instances/%2e%2e` would become `/1.0` and
 * `/1.0/../1.0/operations/x/wait` the wait route. A path here is matched as sent: a dot segment is
 * a value like any other (a name `..` that does not exist) or no route at all.
 */
import { badRequest } from '../../sdk/index.js';

/** A segment that a URL parser would resolve: `.` or `..`, any of its dots written as `%2e`. */
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i;

export interface RequestTarget {
  /** The path as sent (still percent-encoded), dot segments kept, with `.` written `%2E` so no parser resolves them. */
  path: string;
  /** Whether any segment was a dot segment (the path differs from what the URL parsers make of it). */
  dotSegments: boolean;
}

/** Split a request-target (origin form, or absolute form from a proxy) into its literal path. */
export function requestTarget(rawUrl: string): RequestTarget {
  let target = rawUrl;
  if (!target.startsWith('/')) {
    const absolute = /^https?:\/\/[^/?#]*/i.exec(target);
    if (!absolute) throw badRequest('Invalid request target (a path starting with / is expected)');
    target = target.slice(absolute[0].length) || '/';
    if (!target.startsWith('/')) target = `/${target}`;
  }
  const end = target.search(/[?#]/);
  const path = end === -1 ? target : target.slice(0, end);
  let dotSegments = false;
  const segments = path.split('/').map((segment) => {
    checkPercentEncoding(segment);
    if (!DOT_SEGMENT.test(segment)) return segment;
    dotSegments = true;
    return segment.replace(/\.|%2e/gi, '%2E');
  });
  return { path: segments.join('/'), dotSegments };
}

function checkPercentEncoding(segment: string): void {
  if (!segment.includes('%')) return;
  try {
    decodeURIComponent(segment);
  } catch {
    throw badRequest('Invalid percent-encoding in the request path');
  }
}
