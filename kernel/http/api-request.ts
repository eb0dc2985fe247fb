/** The request object handlers see: parsed query conventions, trust and requestor; no hapi toolkit. */
import type { ServerResponse } from 'node:http';
import type Logger from 'bunyan';
import { preconditionFailed, type ApiRequest, type Requestor } from '../../sdk/index.js';
import { etagOf } from './envelope.js';
import { requestTarget } from './request-target.js';

export interface Caller {
  trusted: boolean;
  requestor: Requestor;
  /** Restricted clients: the projects they may use. */
  projects?: string[];
  /** Metrics-only certificates reach routes with the `metrics` policy. */
  metrics?: boolean;
  /** PEM of the TLS client certificate, if one was presented. */
  certificate?: string;
  /** The client presented the cluster certificate: another member of this cluster. */
  peer?: boolean;
  /** A peer forwarded this request for the caller described here (never forwarded again). */
  forwardedBy?: string;
}

export class KernelRequest implements ApiRequest {
  private logger: Logger | undefined;
  private hangUp: AbortController | undefined;
  body: any;

  constructor(
    readonly id: string,
    readonly method: string,
    readonly path: string,
    readonly params: Record<string, string>,
    readonly fixed: Readonly<Record<string, string>>,
    readonly query: Record<string, string>,
    readonly headers: Record<string, string | string[] | undefined>,
    body: unknown,
    readonly project: string,
    readonly allProjects: boolean,
    readonly target: string | undefined,
    readonly recursion: 0 | 1 | 2,
    readonly caller: Caller,
    private readonly parentLog: Logger,
    readonly rawBody?: NodeJS.ReadableStream,
    /** The answer's raw response, to learn when the client hangs up. */
    private readonly response?: ServerResponse,
  ) {
    this.body = body;
  }

  /** The same request without its headers, body and response: one a cache may hold on to. */
  detached(): KernelRequest {
    return new KernelRequest(this.id, this.method, this.path, this.params, this.fixed, this.query, {}, undefined, this.project, this.allProjects,
      this.target, this.recursion, this.caller, this.parentLog);
  }

  get sentPath(): string {
    const url = this.response?.req?.url;
    return url ? requestTarget(url).path : this.path;
  }

  get trusted(): boolean {
    return this.caller.trusted;
  }

  get requestor(): Requestor {
    return this.caller.requestor;
  }

  get forwardedBy(): string | undefined {
    return this.caller.forwardedBy;
  }

  get restrictedTo(): readonly string[] | undefined {
    return this.caller.projects;
  }

  get clientCertificate(): string | undefined {
    return this.caller.certificate;
  }

  checkIfMatch(content: unknown): void {
    const header = this.headers['if-match'];
    if (!header) return;
    const expected = etagOf(content);
    const offered = String(header).split(',').map((t) => t.trim().replace(/^W\//, '').replace(/^"|"$/g, ''));
    if (!offered.includes(expected) && !offered.includes('*')) throw preconditionFailed();
  }

  /** Made on first use (only waiting handlers ask): aborted when the connection closes before the answer is sent. */
  get signal(): AbortSignal | undefined {
    const res = this.response;
    if (!res) return undefined;
    if (!this.hangUp) {
      const hangUp = (this.hangUp = new AbortController());
      if (res.closed) {
        if (!res.writableFinished) hangUp.abort();
      } else res.once('close', () => !res.writableFinished && hangUp.abort());
    }
    return this.hangUp.signal;
  }

  /** Child loggers are made on first use: most requests never log. */
  get log(): Logger {
    this.logger ??= this.parentLog.child({ req_id: this.id, method: this.method, path: this.path });
    return this.logger;
  }
}

/** hapi gives arrays for repeated parameters; the API uses the first. */
export function flattenQuery(query: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(query)) out[key] = Array.isArray(value) ? String(value[0] ?? '') : String(value ?? '');
  return out;
}
