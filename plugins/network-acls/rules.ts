/**
 * Checks of ACL rules, as the reference makes them (with 400s where it answers 500): each field's
 * syntax, fields that need a protocol, and address families that cannot meet. Names of other ACLs
 * and the `@internal`/`@external` selectors are valid subjects on the remote side of a rule
 * (source of ingress, destination of egress); whether a network type can enforce them is checked
 * when an ACL is put on a network.
 */
import { badRequest, isPlainObject } from '../../sdk/index.js';
import type { AclRule, Direction } from './acl.js';
import { parseCidr, parseIp, parseRange, type Family } from './addresses.js';

const ACTIONS = ['allow', 'reject', 'drop'];
const STATES = ['enabled', 'disabled', 'logged'];
const PROTOCOLS = ['icmp4', 'icmp6', 'tcp', 'udp'];
export const SELECTORS = ['@internal', '@external'];

export interface Subject {
  /** An address, subnet or range in nft syntax. */
  address?: { family: Family; text: string };
  /** An ACL name or a selector. */
  name?: string;
}

export const splitList = (value: string | undefined): string[] => (value ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');

export function parseSubject(text: string): Subject | undefined {
  const ip = parseIp(text);
  if (ip) return { address: { family: ip.family, text } };
  const cidr = parseCidr(text);
  if (cidr) return { address: { family: cidr.family, text } };
  const range = parseRange(text);
  if (range) return { address: { family: range.family, text } };
  return undefined;
}

/** A port list: numbers and `first-last` ranges (first lower than last), each 0 to 65535. */
export function checkPorts(value: string): string[] {
  const out: string[] = [];
  for (const part of splitList(value)) {
    const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(part);
    if (!m) throw new Error(`"${part}" is not a port or port range`);
    const first = Number(m[1]);
    const last = m[2] === undefined ? first : Number(m[2]);
    if (first > 65535 || last > 65535) throw new Error(`port "${part}" is above 65535`);
    if (m[2] !== undefined && first >= last) throw new Error(`in the range "${part}" the first port must be lower than the last`);
    out.push(part);
  }
  return out;
}

const str = (raw: Record<string, unknown>, key: string): string | undefined => {
  const v = raw[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new Error(`"${key}" must be a string`);
  return v.trim() === '' ? undefined : v.trim();
};

/** Families the addresses of a subject list use (names count as neither). */
function families(subjects: Subject[]): Set<Family> {
  return new Set(subjects.flatMap((s) => (s.address ? [s.address.family] : [])));
}

/**
 * One rule, checked and normalised; `aclExists` says whether a name is an ACL of the same project.
 * Throws a 400 naming the rule (`ingress rule 0`).
 */
export function checkRule(dir: Direction, index: number, raw: unknown, aclExists: (name: string) => boolean): AclRule {
  try {
    if (!isPlainObject(raw)) throw new Error('a rule must be an object');
    const known = ['action', 'source', 'destination', 'protocol', 'source_port', 'destination_port', 'icmp_type', 'icmp_code', 'description', 'state'];
    for (const key of Object.keys(raw)) if (!known.includes(key)) throw new Error(`unknown field "${key}"`);
    const rule: AclRule = { action: str(raw, 'action') ?? '', state: str(raw, 'state') ?? '' };
    if (!ACTIONS.includes(rule.action)) throw new Error(`action must be one of ${ACTIONS.join(', ')}`);
    if (!STATES.includes(rule.state)) throw new Error(`state must be one of ${STATES.join(', ')}`);
    const description = raw.description;
    if (description !== undefined && description !== null && typeof description !== 'string') throw new Error('"description" must be a string');
    if (description) rule.description = description;

    const subjects = (field: 'source' | 'destination'): Subject[] => {
      const value = str(raw, field);
      if (value === undefined) return [];
      rule[field] = value;
      // Names stand for the remote side: where traffic comes from on ingress, goes to on egress.
      const namesAllowed = (dir === 'ingress') === (field === 'source');
      return splitList(value).map((text) => {
        const subject = parseSubject(text);
        if (subject) return subject;
        if (SELECTORS.includes(text) || aclExists(text)) {
          if (!namesAllowed) throw new Error(`${field}: ACL names and selectors are only allowed in the ${dir === 'ingress' ? 'source' : 'destination'} of ${dir} rules ("${text}")`);
          return { name: text };
        }
        throw new Error(`${field}: "${text}" is not an address, subnet, range, network ACL name or selector`);
      });
    };
    const source = subjects('source');
    const destination = subjects('destination');
    const src = families(source);
    const dst = families(destination);
    if (src.size === 1 && dst.size === 1 && [...src][0] !== [...dst][0]) throw new Error('source and destination use different IP families');

    const protocol = str(raw, 'protocol');
    if (protocol !== undefined) {
      if (!PROTOCOLS.includes(protocol)) throw new Error(`protocol must be one of ${PROTOCOLS.join(', ')}`);
      rule.protocol = protocol;
    }
    for (const field of ['source_port', 'destination_port'] as const) {
      const value = str(raw, field);
      if (value === undefined) continue;
      if (protocol !== 'tcp' && protocol !== 'udp') throw new Error(`${field} needs protocol tcp or udp`);
      try {
        checkPorts(value);
      } catch (err) {
        throw new Error(`${field}: ${(err as Error).message}`);
      }
      rule[field] = value;
    }
    for (const field of ['icmp_type', 'icmp_code'] as const) {
      const value = str(raw, field);
      if (value === undefined) continue;
      if (protocol !== 'icmp4' && protocol !== 'icmp6') throw new Error(`${field} needs protocol icmp4 or icmp6`);
      if (!/^\d{1,3}$/.test(value) || Number(value) > 255) throw new Error(`${field} must be an integer from 0 to 255`);
      rule[field] = value;
    }
    if (protocol === 'icmp4' && (src.has(6) || dst.has(6))) throw new Error('protocol icmp4 cannot be used with IPv6 addresses');
    if (protocol === 'icmp6' && (src.has(4) || dst.has(4))) throw new Error('protocol icmp6 cannot be used with IPv4 addresses');
    return rule;
  } catch (err) {
    throw badRequest(`Invalid ${dir} rule ${index}: ${(err as Error).message}`);
  }
}

export function checkRules(dir: Direction, raw: unknown, aclExists: (name: string) => boolean): AclRule[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw badRequest(`"${dir}" must be a list of rules`);
  return raw.map((r, i) => checkRule(dir, i, r, aclExists));
}

/** ACL names and selectors a rule refers to. */
export const namedSubjects = (r: AclRule): string[] =>
  [...splitList(r.source), ...splitList(r.destination)].filter((s) => !parseSubject(s));

/** ACL config: only `user.*` keys. */
export function checkAclConfig(config: Record<string, string>): void {
  for (const key of Object.keys(config)) if (!key.startsWith('user.')) throw badRequest(`Unknown network ACL option "${key}" (only user.* keys)`);
}
