/**
 * The preseed document (the reference's `init --preseed` format): read, and checked whole before
 * anything is applied, so a typo fails with a clear message and leaves the server untouched.
 */
import { readFile } from 'node:fs/promises';
import { isScalar, parseDocument, visit } from 'yaml';
import { InitError } from './api.js';

export type Config = Record<string, string>;
export interface NetworkItem { name: string; project?: string; type?: string; description?: string; config?: Config }
export interface PoolItem { name: string; driver: string; description?: string; config?: Config }
export interface ProfileItem { name: string; description?: string; config?: Config; devices?: Record<string, Config> }
export interface ProjectItem { name: string; description?: string; config?: Config }

export interface Preseed {
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

/** Checks a parsed document and returns it in the shape the API takes. */
export function checkPreseed(doc: unknown): Preseed {
  if (doc === null || doc === undefined) return {};
  if (!isMap(doc)) throw new InitError(`a preseed is a map of sections (${SECTIONS.join(', ')}), not ${describe(doc)}`);
  const out: Preseed = {};
  for (const [section, value] of Object.entries(doc)) {
    if (!SECTIONS.includes(section)) throw new InitError(`unknown preseed section "${section}" (known: ${SECTIONS.join(', ')})`);
    if (section === 'cluster') {
      // A dump from a standalone reference daemon carries `cluster: null`, which asks for nothing.
      if (value !== null && value !== undefined) throw new InitError('the "cluster" section is not supported: this build of corral has no clustering');
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
