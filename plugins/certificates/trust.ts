/**
 * The trust store (the `certificates` collection) kept in memory, and the decision the `authenticate`
 * hook hands the kernel. Decisions are cached per fingerprint and dropped on every trust change, so
 * a keep-alive client pays for parsing its certificate once.
 */
import { X509Certificate } from 'node:crypto';
import type { AuthDecision, Collection, Store, TlsClient } from '../../sdk/index.js';
import type { TrustedCertificate } from './certificate.js';
import { isRevoked, issuedBy, type Pki } from './pki.js';

/** Stored under no project: certificates are server-wide. */
export const NO_PROJECT = '';
const COLLECTION = 'certificates';

interface CachedDecision {
  notBefore: number;
  notAfter: number;
  decision: AuthDecision | undefined;
}

/** More distinct unknown certificates than this and the cache starts over (a flood cannot grow it). */
const MAX_CACHED = 4096;

export class TrustStore {
  private byFingerprint = new Map<string, { rev: number; doc: TrustedCertificate }>();
  private readonly decisions = new Map<string, CachedDecision>();

  private readonly records: Collection<TrustedCertificate>;

  constructor(
    private readonly store: Store,
    private readonly pki: () => Pki | undefined,
    private readonly trustCa: () => boolean,
  ) {
    this.records = store.collection<TrustedCertificate>(COLLECTION);
  }

  async load(): Promise<void> {
    const next = new Map<string, { rev: number; doc: TrustedCertificate }>();
    for (const { rev, doc } of await this.records.list(NO_PROJECT)) next.set(doc.fingerprint, { rev, doc });
    this.byFingerprint = next;
    this.decisions.clear();
  }

  /** Forget cached decisions (trust changed: a write, `core.trust_ca_certificates`). */
  invalidate(): void {
    this.decisions.clear();
  }

  list(): TrustedCertificate[] {
    return [...this.byFingerprint.values()].map((e) => e.doc).sort((a, b) => a.fingerprint.localeCompare(b.fingerprint));
  }

  get(fingerprint: string): { rev: number; doc: TrustedCertificate } | undefined {
    return this.byFingerprint.get(fingerprint);
  }

  /** Fingerprints starting with `prefix` (the API accepts any unambiguous prefix). */
  matching(prefix: string): TrustedCertificate[] {
    const wanted = prefix.toLowerCase();
    return this.list().filter((c) => c.fingerprint.startsWith(wanted));
  }

  async put(doc: TrustedCertificate, expectedRev?: number, replaces?: string): Promise<void> {
    if (replaces && replaces !== doc.fingerprint) {
      // A new certificate in the entry: the key is its fingerprint, so the record moves.
      await this.store.transaction(async (tx) => {
        const records = tx.collection<TrustedCertificate>(COLLECTION);
        await records.put(NO_PROJECT, doc.fingerprint, doc, 0);
        await records.delete(NO_PROJECT, replaces, expectedRev);
      });
    } else {
      await this.records.put(NO_PROJECT, doc.fingerprint, doc, expectedRev);
    }
    await this.load();
  }

  async remove(fingerprint: string): Promise<void> {
    await this.records.delete(NO_PROJECT, fingerprint);
    await this.load();
  }

  /** The `authenticate` tap: trusted entries, CA-issued certificates in PKI mode; nothing for everybody else. */
  decide(client: TlsClient): AuthDecision | undefined {
    const fingerprint = client.fingerprint;
    if (!fingerprint || !client.certificate) return undefined;
    let cached = this.decisions.get(fingerprint);
    if (!cached) {
      cached = this.compute(fingerprint, client.certificate);
      if (this.decisions.size >= MAX_CACHED) this.decisions.clear();
      this.decisions.set(fingerprint, cached);
    }
    const now = Date.now();
    // Outside its validity a certificate is nobody, whatever the store says.
    if (now < cached.notBefore || now > cached.notAfter) return undefined;
    return cached.decision;
  }

  private compute(fingerprint: string, pem: string): CachedDecision {
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(pem);
    } catch {
      return { notBefore: 0, notAfter: 0, decision: undefined };
    }
    const validity = { notBefore: Date.parse(cert.validFrom), notAfter: Date.parse(cert.validTo) };
    const pki = this.pki();
    if (pki && (!issuedBy(cert, pki) || isRevoked(cert, pki))) return { ...validity, decision: undefined };
    const entry = this.byFingerprint.get(fingerprint)?.doc;
    if (entry?.type === 'metrics') return { ...validity, decision: Object.freeze({ trusted: false, metrics: true, username: fingerprint, projects: entry.restricted ? Object.freeze([...entry.projects]) as string[] : undefined }) };
    if (entry) {
      return {
        ...validity,
        decision: Object.freeze({ trusted: true, username: fingerprint, projects: entry.restricted ? Object.freeze([...entry.projects]) as string[] : undefined }),
      };
    }
    if (pki && this.trustCa()) return { ...validity, decision: Object.freeze({ trusted: true, username: fingerprint }) };
    return { ...validity, decision: undefined };
  }
}
