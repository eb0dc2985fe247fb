/**
 * POST /1.0/images/<fingerprint>/secret: a token operation whose secret lets an untrusted client
 * (another daemon pulling the image) read that one image and download it once, as the reference
 * lets it. Reading the image's record does not spend the secret (the puller reads it before the
 * files); the download does. The token also ends when cancelled, or with the daemon.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ApiRequest, Operation, OperationsService } from '../../sdk/index.js';
import { imageUrl } from './image.js';

interface Pending {
  project: string;
  fingerprint: string;
  finish: () => void;
}

const digest = (secret: string) => createHash('sha256').update(secret).digest();

export class DownloadTokens {
  /** Keyed by the secret's digest: lookups compare digests, and the secret itself is not kept. */
  private readonly pending = new Map<string, Pending>();

  constructor(private readonly operations: OperationsService) {}

  create(req: ApiRequest, project: string, fingerprint: string): Operation {
    const secret = randomBytes(32).toString('hex');
    const key = digest(secret).toString('hex');
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const finish = () => {
      this.pending.delete(key);
      release();
    };
    // Registered before the operation runs, so a pull right after the answer finds it.
    this.pending.set(key, { project, fingerprint, finish });
    try {
      return this.operations.create({
        class: 'token',
        description: 'Image download token',
        request: req,
        resources: { images: [imageUrl(project, fingerprint)] },
        metadata: { secret },
        mayCancel: true,
        run: (op) => {
          op.signal.addEventListener('abort', finish, { once: true });
          return released;
        },
      });
    } catch (err) {
      this.pending.delete(key);
      throw err;
    }
  }

  private find(secret: string | undefined, project: string, fingerprint: string): Pending | undefined {
    if (!secret) return undefined;
    const wanted = digest(secret);
    for (const [key, entry] of this.pending) {
      if (timingSafeEqual(Buffer.from(key, 'hex'), wanted) && entry.project === project && entry.fingerprint === fingerprint) return entry;
    }
    return undefined;
  }

  /** Whether `secret` opens this image (not spent by asking). */
  opens(secret: string | undefined, project: string, fingerprint: string): boolean {
    return !!this.find(secret, project, fingerprint);
  }

  /** Spend the secret (the download it opened has started). */
  spend(secret: string | undefined, project: string, fingerprint: string): void {
    this.find(secret, project, fingerprint)?.finish();
  }
}
