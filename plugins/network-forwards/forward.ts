/** The stored network forward and how the API shows it. */
import { networkUrl } from '../../sdk/index.js';

export interface ForwardPort {
  description: string;
  protocol: string;
  listen_port: string;
  target_port: string;
  target_address: string;
}

export interface ForwardRecord {
  /** The network it belongs to (records of one network share a key prefix). */
  network: string;
  listen_address: string;
  description: string;
  config: Record<string, string>;
  ports: ForwardPort[];
}

/** One store key per forward: network and listen address. */
export const forwardKey = (network: string, listen: string) => `${network}|${listen}`;
export const networkPrefix = (network: string) => `${network}|`;

const portView = (p: ForwardPort) => ({
  description: p.description, protocol: p.protocol, listen_port: p.listen_port, target_port: p.target_port, target_address: p.target_address,
});

/** What PUT replaces and the ETag is computed from. */
export const editableView = (rec: ForwardRecord) => ({ description: rec.description, config: rec.config, ports: rec.ports.map(portView) });

/** Field order as the reference answers. */
export const forwardView = (rec: ForwardRecord) => ({
  description: rec.description, config: rec.config, ports: rec.ports.map(portView), listen_address: rec.listen_address, location: 'none',
});

export function forwardUrl(project: string, network: string, listen: string): string {
  const base = networkUrl(project, network);
  const q = base.indexOf('?');
  const path = `${q < 0 ? base : base.slice(0, q)}/forwards/${encodeURIComponent(listen)}`;
  return q < 0 ? path : `${path}${base.slice(q)}`;
}
