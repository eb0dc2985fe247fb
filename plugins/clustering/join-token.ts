/**
 * Join tokens (`clustering_join_token`). A token is a `token`-class operation on the member that issued
 * it, whose metadata the 5.0 client turns into the base64 JSON token it prints, and a record in the
 * cluster store, so that whichever member the joiner reaches can check it. One token per future member
 * name: a new one replaces the old, as in the reference. Revoking (cancelling the operation), expiry
 * and use each remove the record; a member seeing a record go ends its own operation.
 */
import { conflict, randomHex, sameSecret, type Collection, type Operation, type OperationsService, type Requestor, type StoreChange } from '../../sdk/index.js';

export interface TokenRecord {
  server_name: string;
  secret: string;
  expires_at: string;
  /** The operation holding it and the member it runs on. */
  operation: string;
  issuer: string;
}

/** The token as the client prints it and the joiner sends it (base64 of this JSON). */
export interface JoinToken {
  server_name: string;
  fingerprint: string;
  addresses: string[];
  secret: string;
  expires_at: string;
}

export const TOKENS_COLLECTION = 'join-tokens';

export function encodeToken(token: JoinToken): string {
  return Buffer.from(JSON.stringify(token)).toString('base64');
}

/** The token a joiner was given; undefined when it is not one. */
export function decodeToken(text: string): JoinToken | undefined {
  try {
    const t = JSON.parse(Buffer.from(text, 'base64').toString('utf8')) as Partial<JoinToken>;
    if (typeof t.server_name !== 'string' || typeof t.secret !== 'string' || typeof t.fingerprint !== 'string' || !Array.isArray(t.addresses)) return undefined;
    if (!t.addresses.every((a) => typeof a === 'string')) return undefined;
    return { server_name: t.server_name, secret: t.secret, fingerprint: t.fingerprint, addresses: t.addresses, expires_at: typeof t.expires_at === 'string' ? t.expires_at : '' };
  } catch {
    return undefined;
  }
}

export class JoinTokens {
  private readonly timers = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly records: Collection<TokenRecord>,
    private readonly operations: OperationsService,
    private readonly localName: () => string,
  ) {}

  async issue(opts: { name: string; fingerprint: string; addresses: string[]; lifetimeMs: number; requestor: Requestor }): Promise<Operation> {
    const previous = await this.records.get('', opts.name);
    const secret = randomHex(32);
    const expiresAt = new Date(Date.now() + opts.lifetimeMs).toISOString();
    const op = this.operations.create({
      class: 'token',
      description: 'Executing operation',
      resources: { cluster: [] },
      // Keys in the reference's order (its Go map prints sorted).
      metadata: { addresses: opts.addresses, expiresAt, fingerprint: opts.fingerprint, secret, serverName: opts.name },
      mayCancel: true,
      requestor: opts.requestor,
      // Revoked (`lxc cluster revoke-token`), expired or used: the record goes too.
      onCancel: () => this.forget(opts.name, secret),
    });
    try {
      await this.records.put('', opts.name, { server_name: opts.name, secret, expires_at: expiresAt, operation: op.id, issuer: this.localName() }, previous ? previous.rev : 0);
    } catch (err) {
      await this.operations.cancel(op.id).catch(() => undefined);
      // Two requests for one name at once: the other one's token stands.
      if ((err as { status?: number }).status === 412) throw conflict(`A join token for "${opts.name}" was just issued`);
      throw err;
    }
    if (previous) this.endLocal(previous.doc);
    const timer = setTimeout(() => void this.operations.cancel(op.id).catch(() => undefined), opts.lifetimeMs);
    timer.unref();
    this.timers.set(op.id, timer);
    return op;
  }

  /** The valid token record for `name` whose secret is `secret` (and its revision), or why there is none. */
  async find(name: string, secret: string): Promise<{ record: TokenRecord; rev: number } | { refused: string }> {
    const stored = await this.records.get('', name);
    if (!stored || !sameSecret(stored.doc.secret, secret)) return { refused: `No valid join token for member "${name}"` };
    if (Date.parse(stored.doc.expires_at) <= Date.now()) return { refused: `The join token for member "${name}" has expired` };
    return { record: stored.doc, rev: stored.rev };
  }

  /** Another member used or revoked a token this member issued: end the operation here. */
  onStoreChange(change: StoreChange, lookup: () => Promise<TokenRecord | undefined>): void {
    if (change.collection !== TOKENS_COLLECTION || change.kind !== 'delete') return;
    void lookup().then((record) => {
      if (record) return;
      for (const op of this.operations.list({ class: 'token' })) {
        const meta = op.view().metadata as { serverName?: string } | null;
        if (meta?.serverName === change.name) void this.operations.cancel(op.id).catch(() => undefined);
      }
    });
  }

  private endLocal(record: TokenRecord): void {
    if (record.issuer !== this.localName()) return;
    const timer = this.timers.get(record.operation);
    if (timer) clearTimeout(timer);
    this.timers.delete(record.operation);
    void this.operations.cancel(record.operation).catch(() => undefined);
  }

  /** Remove the record if it is still this token's (a newer token for the name stays). */
  private async forget(name: string, secret: string): Promise<void> {
    const stored = await this.records.get('', name).catch(() => undefined);
    if (stored && stored.doc.secret === secret) await this.records.delete('', name, stored.rev).catch(() => undefined);
  }
}
