/**
 * The preseed document (the reference's `init --preseed` format): read, and checked whole before
 * anything is applied, so a typo fails with a clear message and leaves the server untouched.
 */
import { readFile } from 'node:fs/promises';
import { yaml } from '../../sdk/lib/yaml/index.js';
import { InitError } from './api.js';

export type Config = Record<string, string>;
export interface NetworkItem { name: string; project?: string; type?: string; description?: string; config?: Config }
export interface PoolItem { name: string; driver: string; description?: string; config?: Config }
export interface ProfileItem { name: string; description?: string; config?: Config; devices?: Record<string, Config> }
export interface ProjectItem { name: string; description?: string; config?: Config }

/** The cluster step (`PUT /1.0/cluster`'s body): enable with `server_name`, or join with `cluster_address` and a token. */
export interface ClusterItem {
  server_name?: string;
  enabled: boolean;
  server_address?: string;
  cluster_address?: string;
  cluster_certificate?: string;
  cluster_certificate_path?: string;
  cluster_password?: string;
  cluster_token?: string;
  member_config?: { entity: string; name: string; key: string; value: string; description?: string }[];
}

export interface Preseed {
  cluster?: ClusterItem;
  config?: Config;
  networks?: NetworkItem[];
  storage_pools?: PoolItem[];
  profiles?: ProfileItem[];
  projects?: ProjectItem[];
}

type Field = 'name' | 'text' | 'config' | 'devices';
/** The fields each list section's items may have, and which are required. */
const ITEMS: Record<string, { fields: Record<string, Field>; required: string[] }> = {
  networks: { fields: { name: 'name', project: 'name', type: 'text', description: 'text', config: 'config' }, required: ['name'] },
  storage_pools: { fields: { name: 'name', driver: 'name', description: 'text', config: 'config' }, required: ['name', 'driver'] },
  profiles: { fields: { name: 'name', description: 'text', config: 'config', devices: 'devices' }, required: ['name'] },
  projects: { fields: { name: 'name', description: 'text', config: 'config' }, required: ['name'] },
};
const SECTIONS = ['config', ...Object.keys(ITEMS), 'cluster'];

const isMap = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A config value as the API takes it: text (see parsePreseed). Maps, lists and nulls are mistakes. */
function configValue(value: unknown, where: string): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  throw new InitError(`${where} must be a string, number or boolean, not ${describe(value)}`);
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return 'empty';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'a map' : `a ${typeof value}`;
}

function config(value: unknown, where: string): Config {
  if (value === null || value === undefined) return {};
  if (!isMap(value)) throw new InitError(`${where} must be a map of keys to values, not ${describe(value)}`);
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, configValue(v, `${where}.${k}`)]));
}

function item(section: string, value: unknown, index: number): Record<string, unknown> {
  const spec = ITEMS[section]!;
  const at = `${section}[${index}]`;
  if (!isMap(value)) throw new InitError(`${at} must be a map, not ${describe(value)}`);
  const named = typeof value.name === 'string' ? `${at} (${value.name})` : at;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const kind = spec.fields[key];
    if (!kind) throw new InitError(`${named} has an unknown key "${key}" (known: ${Object.keys(spec.fields).join(', ')})`);
    if (kind === 'config') out[key] = config(v, `${named}.${key}`);
    else if (kind === 'devices') {
      if (v !== null && v !== undefined && !isMap(v)) throw new InitError(`${named}.devices must be a map of device names to their config, not ${describe(v)}`);
      out[key] = Object.fromEntries(Object.entries(v ?? {}).map(([dev, c]) => [dev, config(c, `${named}.devices.${dev}`)]));
    } else if (v === null || v === undefined || (kind === 'text' && v === '')) continue;
    else if (typeof v !== 'string' || (kind === 'name' && v === '')) throw new InitError(`${named}.${key} must be ${kind === 'name' ? 'a non-empty string' : 'a string'}, not ${describe(v)}`);
    else out[key] = v;
  }
  for (const key of spec.required) if (out[key] === undefined) throw new InitError(`${named} needs a "${key}"`);
  return out;
}

const CLUSTER_TEXT = ['server_name', 'server_address', 'cluster_address', 'cluster_certificate', 'cluster_certificate_path', 'cluster_password', 'cluster_token'];
const MEMBER_CONFIG_TEXT = ['entity', 'name', 'key', 'value', 'description'];

function clusterSection(value: unknown): ClusterItem {
  if (!isMap(value)) throw new InitError(`cluster must be a map, not ${describe(value)}`);
  const out: ClusterItem = { enabled: false };
  for (const [key, v] of Object.entries(value)) {
    if (key === 'enabled') {
      // parsePreseed keeps scalars as written: `true` arrives as text.
      const flag = typeof v === 'boolean' ? String(v) : v;
      if (flag !== 'true' && flag !== 'false') throw new InitError(`cluster.enabled must be true or false, not ${typeof v === 'string' ? `"${v}"` : describe(v)}`);
      out.enabled = flag === 'true';
    } else if (key === 'member_config') {
      if (v === null || v === undefined) continue;
      if (!Array.isArray(v)) throw new InitError(`cluster.member_config must be a list, not ${describe(v)}`);
      out.member_config = v.map((entry, i) => {
        if (!isMap(entry)) throw new InitError(`cluster.member_config[${i}] must be a map, not ${describe(entry)}`);
        for (const k of Object.keys(entry)) if (!MEMBER_CONFIG_TEXT.includes(k)) throw new InitError(`cluster.member_config[${i}] has an unknown key "${k}" (known: ${MEMBER_CONFIG_TEXT.join(', ')})`);
        for (const k of ['entity', 'name', 'key']) if (typeof entry[k] !== 'string' || entry[k] === '') throw new InitError(`cluster.member_config[${i}] needs a "${k}"`);
        return { entity: entry.entity as string, name: entry.name as string, key: entry.key as string, value: configValue(entry.value ?? '', `cluster.member_config[${i}].value`) };
      });
    } else if (CLUSTER_TEXT.includes(key)) {
      if (v === null || v === undefined || v === '') continue;
      if (typeof v !== 'string') throw new InitError(`cluster.${key} must be a string, not ${describe(v)}`);
      (out as unknown as Record<string, string>)[key] = v;
    } else {
      throw new InitError(`cluster has an unknown key "${key}" (known: enabled, member_config, ${CLUSTER_TEXT.join(', ')})`);
    }
  }
  return out;
}

/** Checks a parsed document and returns it in the shape the API takes. */
export function checkPreseed(doc: unknown): Preseed {
  if (doc === null || doc === undefined) return {};
  if (!isMap(doc)) throw new InitError(`a preseed is a map of sections (${SECTIONS.join(', ')}), not ${describe(doc)}`);
  const out: Preseed = {};
  for (const [section, value] of Object.entries(doc)) {
    if (!SECTIONS.includes(section)) throw new InitError(`unknown preseed section "${section}" (known: ${SECTIONS.join(', ')})`);
    if (section === 'cluster') {
      // A dump from a standalone reference daemon carries `cluster: null`, which asks for nothing.
      if (value !== null && value !== undefined) out.cluster = clusterSection(value);
      continue;
    }
    if (section === 'config') {
      out.config = config(value, 'config');
      continue;
    }
    if (value === null || value === undefined) continue;
    if (!Array.isArray(value)) throw new InitError(`${section} must be a list, not ${describe(value)}`);
    const items = value.map((v, i) => item(section, v, i));
    const seen = new Set<string>();
    for (const it of items) {
      const key = `${it.project ?? 'default'}/${it.name}`;
      if (seen.has(key)) throw new InitError(`${section} lists "${it.name}" twice`);
      seen.add(key);
    }
    (out as Record<string, unknown>)[section] = items;
  }
  return out;
}

/**
 * Numbers and booleans are kept as written (`size: 10`, `mode: 0755`, `ipv4.nat: yes` give "10",
 * "0755", "yes"): the API takes text, and the reference's decoder reads item config this way.
 */
export function parsePreseed(text: string): Preseed {
  const { isScalar, parseDocument, visit } = yaml();
  const doc = parseDocument(text);
  if (doc.errors.length) throw new InitError(`the preseed is not valid YAML: ${doc.errors[0]!.message.split('\n')[0]}`);
  visit(doc, {
    Scalar(_key, node) {
      if (isScalar(node) && (typeof node.value === 'number' || typeof node.value === 'boolean') && node.source !== undefined) node.value = node.source;
    },
  });
  return checkPreseed(doc.toJS());
}

/** Reads and checks a preseed from a file, or from standard input for `-`. */
export async function readPreseed(source: string): Promise<Preseed> {
  let text: string;
  try {
    text = source === '-' ? await readStdin() : await readFile(source, 'utf8');
  } catch (err) {
    throw new InitError(`cannot read the preseed ${source}: ${(err as Error).message}`);
  }
  return parsePreseed(text);
}

async function readStdin(): Promise<string> {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return text;
}
