/**
 * Secrets for one image (POST /1.0/images/<fp>/secret): a token operation whose secret lets a
 * client that is not trusted (another daemon pulling the image) read that image's record and
 * download it, though it is private. The download spends the secret (the reference ends the token
 * operation there too); cancelling the operation withdraws it.
 */
import { randomHex, sameSecret, type ApiRequest, type Operation, type OperationsService } from '../../sdk/index.js';
import { imageUrl } from './image.js';

interface Grant {
  project: string;
  fingerprint: string;
  finish: () => void;
}

export class ImageSecrets {
  private readonly pending = new Map<string, Grant>();

  constructor(private readonly operations: OperationsService) {}

  create(req: ApiRequest, project: string, fingerprint: string): Operation {
    const secret = randomHex(32);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const finish = () => {
      this.pending.delete(secret);
      release();
    };
    this.pending.set(secret, { project, fingerprint, finish });
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
      this.pending.delete(secret);
      throw err;
    }
  }

  /** Whether `secret` opens this image; `use` spends it (the download). Compared in constant time. */
  check(secret: string | undefined, project: string, fingerprint: string, use = false): boolean {
    if (!secret) return false;
    for (const [known, grant] of this.pending) {
      if (!sameSecret(known, secret)) continue;
      if (grant.project !== project || grant.fingerprint !== fingerprint) return false;
      if (use) grant.finish();
      return true;
    }
    return false;
  }
}
