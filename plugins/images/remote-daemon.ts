/**
 * A client for another daemon's REST API over HTTPS, as one daemon talks to another when it pulls an
 * image: the peer's certificate pinned when the request gave one (else the system's authorities), and
 * this daemon's own server certificate presented as the client certificate. Every wait is bounded and
 * the caller's signal aborts it.
 */
import { X509Certificate } from 'node:crypto';
import { request as httpsRequest } from 'node:https';
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { PeerCertificate } from 'node:tls';

/** How long connecting and then each silence of the peer may last. */
const CONNECT_TIMEOUT_MS = 15_000;
const IDLE_TIMEOUT_MS = 60_000;
/** JSON answers (an image's record, an alias) are small; a larger one is a broken peer. */
const MAX_JSON_BYTES = 4 * 1024 * 1024;

export interface ClientIdentity {
  cert: string;
  key: string;
}

/** A failure talking to the peer; `status` is its HTTP status when it answered. */
export class RemoteError extends Error {
  constructor(message: string, readonly status?: number) {
    super(message);
  }
}

const derOf = (pem: string) => new X509Certificate(pem).raw;
const certificatePem = (der: Buffer) => `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/.{64}/g, '$&\n')}\n-----END CERTIFICATE-----\n`;

export class RemoteDaemon {
  private readonly base: URL;
  private readonly pinned?: Buffer;

  constructor(server: string, certificate: string | undefined, private readonly identity: ClientIdentity | undefined, private readonly signal: AbortSignal) {
    this.base = new URL(server);
    this.pinned = certificate ? derOf(certificate) : undefined;
  }

  /** The peer's name in messages: its URL as given. */
  get name(): string {
    return this.base.origin;
  }

  /** GET a synchronous answer and return its `metadata`. */
  async json(path: string, query: Record<string, string> = {}): Promise<any> {
    return this.envelope(path, await this.get(path, query));
  }

  /** The status and headers of a HEAD request that answered 2xx or a redirect (a URL source names its image in them). */
  async head(path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: IncomingHttpHeaders }> {
    const res = await this.get(path, {}, 'HEAD', headers);
    res.resume();
    const status = res.statusCode ?? 0;
    if (status < 200 || status >= 400) throw new RemoteError(`${this.name} answered HEAD ${path} with HTTP ${status}`, status);
    return { status, headers: res.headers };
  }

  /** GET a raw answer (a download); an error envelope becomes a RemoteError. */
  async download(path: string, query: Record<string, string> = {}): Promise<IncomingMessage> {
    const res = await this.get(path, query);
    if (res.statusCode === 200) return res;
    await this.envelope(path, res);
    throw new RemoteError(`${this.name} answered ${path} with HTTP ${res.statusCode}`, res.statusCode);
  }

  /** A download's stream failing midway, said as the peer's fault or the cancellation it was. */
  broken(err: unknown): Error {
    if (err instanceof RemoteError || (err as { status?: number }).status !== undefined) return err as Error;
    if (this.signal.aborted) return new RemoteError('The download was cancelled');
    return new RemoteError(`The download from ${this.name} broke off: ${(err as Error).message}`);
  }

  /** The `metadata` of a JSON answer, or a RemoteError with what the peer said. */
  private async envelope(path: string, res: IncomingMessage): Promise<any> {
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res) {
        size += chunk.length;
        if (size > MAX_JSON_BYTES) {
          res.destroy();
          throw new RemoteError(`The answer of ${this.name} to ${path} is too large`);
        }
        chunks.push(chunk as Buffer);
      }
    } catch (err) {
      throw this.broken(err);
    }
    let body: any;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      throw new RemoteError(`${this.name} answered ${path} with something other than JSON (HTTP ${res.statusCode})`, res.statusCode);
    }
    if (res.statusCode !== 200 || body?.type === 'error') {
      const said = typeof body?.error === 'string' && body.error ? body.error : `HTTP ${res.statusCode}`;
      throw new RemoteError(`${this.name} answered ${path}: ${said}`, res.statusCode);
    }
    return body?.metadata;
  }

  private get(path: string, query: Record<string, string>, method = 'GET', headers: Record<string, string> = {}): Promise<IncomingMessage> {
    const url = new URL(path, this.base);
    for (const [key, value] of Object.entries(query)) if (value) url.searchParams.set(key, value);
    // Plain HTTP only for URL sources (the reference fetches those over either); daemons are always HTTPS.
    const send = url.protocol === 'http:' ? httpRequest : httpsRequest;
    return new Promise((resolve, reject) => {
      const req = send(url, {
        method,
        signal: this.signal,
        headers: { 'User-Agent': 'corral', Accept: 'application/json, application/octet-stream, multipart/form-data', ...headers },
        cert: this.identity?.cert,
        key: this.identity?.key,
        // A pinned certificate is the whole check (peers are named by address and their certificates are
        // self-signed, as the reference's are); without one the system's authorities and the host name decide.
        ...(this.pinned ? {
          ca: certificatePem(this.pinned),
          checkServerIdentity: (_host: string, cert: PeerCertificate) => (cert.raw.equals(this.pinned!)
            ? undefined
            : new RemoteError(`The certificate of ${this.name} is not the one given in "certificate"`)),
        } : {}),
      });
      const connectTimer = setTimeout(() => req.destroy(new RemoteError(`${this.name} did not answer within ${CONNECT_TIMEOUT_MS / 1000} s`)), CONNECT_TIMEOUT_MS);
      req.setTimeout(IDLE_TIMEOUT_MS, () => req.destroy(new RemoteError(`${this.name} stopped answering for ${IDLE_TIMEOUT_MS / 1000} s`)));
      req.on('response', (res) => {
        clearTimeout(connectTimer);
        resolve(res);
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(connectTimer);
        reject(this.describe(err));
      });
      req.end();
    });
  }

  private describe(err: NodeJS.ErrnoException): Error {
    if (err instanceof RemoteError) return err;
    if (err.name === 'AbortError') return new RemoteError('The download was cancelled');
    const code = err.code ?? '';
    if (code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
      return new RemoteError(`Cannot reach ${this.name}: ${code}`);
    }
    if (code.startsWith('ERR_TLS') || code.includes('CERT')) {
      if (this.pinned) return new RemoteError(`The certificate of ${this.name} is not the one given in "certificate" (${code})`);
      return new RemoteError(`The certificate of ${this.name} cannot be trusted (${code}); give the server's certificate in "certificate"`);
    }
    return new RemoteError(`Talking to ${this.name} failed: ${err.message}`);
  }
}
