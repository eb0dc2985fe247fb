/**
 * Push mode: a client first POSTs the image's JSON description (`source.mode: push`) and gets a
 * token operation with a secret; the upload that follows with `X-LXD-secret` gets the aliases,
 * properties, expiry and visibility given up front. A secret is good for one upload.
 */
import { randomHex, type ApiRequest, type Operation, type OperationsService } from '../../sdk/index.js';
import { imageUrl } from './image.js';
import { NEVER_USED } from './times.js';

export interface PushGrant {
  project: string;
  fingerprint: string;
  aliases: { name: string; description: string }[];
  /** Absent: the image's own expiry applies. */
  expires_at?: string;
  /** Absent: the image's own properties apply. */
  properties?: Record<string, string>;
  public: boolean;
  auto_update: boolean;
}

export class PushTokens {
  private readonly pending_ = new Map<string, { grant: PushGrant; finish: () => void }>();

  constructor(private readonly operations: OperationsService) {}

  create(req: ApiRequest, grant: PushGrant): Operation {
    const secret = randomHex(32);
    // Registered before the operation runs, so an upload right after the answer finds it.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const finish = () => {
      this.pending_.delete(secret);
      release();
    };
    this.pending_.set(secret, { grant, finish });
    try {
      return this.createOperation(req, grant, secret, released, finish);
    } catch (err) {
      this.pending_.delete(secret);
      throw err;
    }
  }

  private createOperation(req: ApiRequest, grant: PushGrant, secret: string, released: Promise<void>, finish: () => void): Operation {
    return this.operations.create({
      class: 'token',
      description: 'Image download token',
      request: req,
      resources: { images: [imageUrl(grant.project, grant.fingerprint)] },
      metadata: {
        aliases: grant.aliases,
        expires_at: grant.expires_at ?? NEVER_USED,
        properties: grant.properties ?? null,
        public: grant.public,
        secret,
      },
      mayCancel: true,
      run: (op) => {
        op.signal.addEventListener('abort', finish, { once: true });
        return released;
      },
    });
  }

  /** Whether a secret is pending for the project, without using it up (an untrusted upload is let in on it). */
  pending(secret: string, project: string): boolean {
    return this.pending_.get(secret)?.grant.project === project;
  }

  /** Use up a secret; undefined when it is unknown, spent, or for another project. */
  take(secret: string, project: string): PushGrant | undefined {
    const entry = this.pending_.get(secret);
    if (!entry || entry.grant.project !== project) return undefined;
    entry.finish();
    return entry.grant;
  }
}
