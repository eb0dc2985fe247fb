/** Errors a handler may throw; the kernel turns each into the error envelope. */

/**
 * HTTP statuses the spec allows in an error envelope (part 7), and 503, which the reference answers
 * when a cluster member or the cluster's database cannot be reached (decision 0059).
 */
export const ALLOWED_ERROR_STATUSES = [400, 401, 403, 404, 409, 412, 500, 503] as const;
export type ErrorStatus = (typeof ALLOWED_ERROR_STATUSES)[number];

export class ApiError extends Error {
  readonly status: ErrorStatus;
  readonly metadata: Record<string, unknown> | null;
  constructor(status: ErrorStatus, message: string, metadata: Record<string, unknown> | null = null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.metadata = metadata;
  }
}

export const badRequest = (message: string) => new ApiError(400, message);
export const forbidden = (message = 'Not authorized') => new ApiError(403, message);
export const notFound = (what = 'Not found') => new ApiError(404, what);
export const conflict = (message: string) => new ApiError(409, message);
export const preconditionFailed = (message = 'ETag doesn\'t match') => new ApiError(412, message);
export const internalError = (message: string) => new ApiError(500, message);
/** A cluster member, or the quorum of the cluster's database, cannot be reached now; retrying later may work. */
export const unavailable = (message: string) => new ApiError(503, message);

export function isApiError(err: unknown): err is ApiError {
  return err instanceof ApiError;
}
