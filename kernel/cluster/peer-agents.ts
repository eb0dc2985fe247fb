/**
 * Pooled keep-alive TLS connections to the other members: one https.Agent per member, presenting
 * this server's certificate (the cluster certificate) and accepting only a member that presents the
 * same one. A new certificate (join, `PUT /1.0/cluster/certificate`) makes new agents.
 */
import https from 'node:https';
import { X509Certificate } from 'node:crypto';
import type { PeerCertificate } from 'node:tls';
import { unavailable, type ClusterMemberInfo } from '../../sdk/index.js';
import type { ServerCertificate } from '../tls/server-certificate.js';

/** Sockets kept per member: enough for fan-outs and streams side by side, bounded so one member cannot take them all. */
const MAX_SOCKETS = 64;
const MAX_FREE_SOCKETS = 16;
/** An idle pooled connection is closed after this (the other side keeps them longer). */
const FREE_SOCKET_MS = 30_000;

export interface PeerEndpoint {
  host: string;
  port: number;
}

/** `host:port`, `[v6]:port`, or a host alone (the default port). */
export function parseMemberAddress(address: string): PeerEndpoint {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(address);
  if (bracketed) return { host: bracketed[1]!, port: bracketed[2] ? Number(bracketed[2]) : 8443 };
  const colon = address.lastIndexOf(':');
  if (colon > 0 && address.indexOf(':') === colon) return { host: address.slice(0, colon), port: Number(address.slice(colon + 1)) };
  return { host: address, port: 8443 };
}

export class PeerAgents {
  private readonly agents = new Map<string, { fingerprint: string; agent: https.Agent }>();

  constructor(private readonly certificate: () => ServerCertificate | undefined) {}

  /** The agent for `member`; 503 when this server has no certificate to present. */
  agentFor(member: ClusterMemberInfo): https.Agent {
    const cert = this.certificate();
    if (!cert) throw unavailable('This server has no certificate to reach other cluster members with');
    const key = `${member.name}\0${member.address}`;
    const known = this.agents.get(key);
    if (known && known.fingerprint === cert.fingerprint) return known.agent;
    known?.agent.destroy();
    const agent = new https.Agent({
      keepAlive: true,
      // Small JSON answers: sent at once, not held back by Nagle's algorithm.
      noDelay: true,
      maxSockets: MAX_SOCKETS,
      maxFreeSockets: MAX_FREE_SOCKETS,
      timeout: FREE_SOCKET_MS,
      cert: cert.cert,
      key: cert.key,
      ca: cert.cert,
      // Pinned: the member must present the cluster certificate itself, whatever names it carries.
      checkServerIdentity: (_host: string, peer: PeerCertificate) => samePin(peer, cert.fingerprint)
        ? undefined
        : new Error(`cluster member "${member.name}" presented a certificate other than the cluster's`),
    });
    this.agents.set(key, { fingerprint: cert.fingerprint, agent });
    return agent;
  }

  /** Drop the agents of members no longer listed (their pooled sockets close). */
  retain(members: readonly ClusterMemberInfo[]): void {
    const keep = new Set(members.map((m) => `${m.name}\0${m.address}`));
    for (const [key, { agent }] of this.agents) {
      if (keep.has(key)) continue;
      agent.destroy();
      this.agents.delete(key);
    }
  }

  close(): void {
    for (const { agent } of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}

function samePin(peer: PeerCertificate, fingerprint: string): boolean {
  if (!peer.raw) return false;
  return new X509Certificate(peer.raw).fingerprint256.replace(/:/g, '').toLowerCase() === fingerprint;
}
