/** The stored network ACL and how the API shows it. */
import { resourceUrl } from '../../sdk/index.js';

export interface AclRule {
  action: string;
  source?: string;
  destination?: string;
  protocol?: string;
  source_port?: string;
  destination_port?: string;
  icmp_type?: string;
  icmp_code?: string;
  description?: string;
  state: string;
}

export interface AclRecord {
  name: string;
  description: string;
  ingress: AclRule[];
  egress: AclRule[];
  config: Record<string, string>;
}

export type Direction = 'ingress' | 'egress';

/** Field order as the reference answers; empty optional fields are left out. */
export function ruleView(r: AclRule): AclRule {
  const out: Record<string, string> = { action: r.action };
  for (const key of ['source', 'destination', 'protocol', 'source_port', 'destination_port', 'icmp_type', 'icmp_code', 'description'] as const) {
    if (r[key]) out[key] = r[key]!;
  }
  out.state = r.state;
  return out as unknown as AclRule;
}

/** What PUT replaces and the ETag is computed from. */
export const editableView = (rec: AclRecord) => ({
  description: rec.description, ingress: rec.ingress.map(ruleView), egress: rec.egress.map(ruleView), config: rec.config,
});

export const aclView = (rec: AclRecord, usedBy: string[]) => ({
  name: rec.name,
  description: rec.description,
  egress: rec.egress.map(ruleView),
  ingress: rec.ingress.map(ruleView),
  config: rec.config,
  used_by: usedBy,
});

export const aclUrl = (project: string, name: string) => resourceUrl(`/1.0/network-acls/${encodeURIComponent(name)}`, project);
