/**
 * The `memory` section. Total memory is the installed memory the kernel manages in hot-pluggable
 * blocks (/sys/devices/system/memory: online blocks times the block size), which, unlike
 * /proc/meminfo's MemTotal, includes what the kernel reserved for itself; without that directory,
 * MemTotal. Used is the total less free memory, buffers and page cache. NUMA nodes come from
 * /sys/devices/system/node, huge pages (of the default size) from /proc/meminfo and each node.
 */
import { HostReader, parseColonBlocks } from './sysfs.js';
import type { MemoryNode, MemoryResources } from './types.js';

const MEMORY = '/sys/devices/system/memory';
const NODES = '/sys/devices/system/node';

/** `Key: 123 kB` lines (also `Node 0 Key: 123 kB`) as a map of numbers (kB or counts). */
function meminfo(text: string | undefined): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, value] of parseColonBlocks(text)[0] ?? []) {
    const m = /^(\d+)/.exec(value);
    if (m) out.set(key.replace(/^Node \d+ /, ''), Number(m[1]));
  }
  return out;
}

/** Bytes of online memory among the given `memoryN` block names; undefined without a block size. */
async function onlineBlocksBytes(host: HostReader, blocks: string[]): Promise<number | undefined> {
  const blockSize = await host.hex(`${MEMORY}/block_size_bytes`);
  if (!blockSize || blocks.length === 0) return undefined;
  const states = await Promise.all(blocks.map((b) => host.text(`${MEMORY}/${b}/online`)));
  return states.filter((s) => s === '1').length * blockSize;
}

const isBlock = (name: string) => /^memory\d+$/.test(name);

export async function collectMemory(host: HostReader): Promise<MemoryResources> {
  const [infoText, blocks, nodeNames] = await Promise.all([
    host.raw('/proc/meminfo'), host.list(MEMORY), host.list(NODES),
  ]);
  const info = meminfo(infoText);
  const kb = (key: string) => (info.get(key) ?? 0) * 1024;
  const hugepageSize = kb('Hugepagesize');

  const total = (await onlineBlocksBytes(host, blocks.filter(isBlock))) ?? kb('MemTotal');
  const available = kb('MemFree') + kb('Buffers') + kb('Cached');

  const nodes = await Promise.all(nodeNames.filter((n) => /^node\d+$/.test(n)).map(async (name): Promise<MemoryNode> => {
    const dir = `${NODES}/${name}`;
    const [nodeText, entries] = await Promise.all([host.raw(`${dir}/meminfo`), host.list(dir)]);
    const nodeInfo = meminfo(nodeText);
    const nodeKb = (key: string) => (nodeInfo.get(key) ?? 0) * 1024;
    const nodeTotal = (await onlineBlocksBytes(host, entries.filter(isBlock))) ?? nodeKb('MemTotal');
    const pagesTotal = nodeInfo.get('HugePages_Total') ?? 0;
    const pagesFree = nodeInfo.get('HugePages_Free') ?? 0;
    return {
      numa_node: Number(name.slice(4)),
      hugepages_used: (pagesTotal - pagesFree) * hugepageSize,
      hugepages_total: pagesTotal * hugepageSize,
      used: nodeKb('MemUsed') || Math.max(0, nodeKb('MemTotal') - nodeKb('MemFree')),
      total: nodeTotal,
    };
  }));

  const pagesTotal = info.get('HugePages_Total') ?? 0;
  const pagesFree = info.get('HugePages_Free') ?? 0;
  const memory: MemoryResources = {
    nodes,
    hugepages_total: pagesTotal * hugepageSize,
    hugepages_used: (pagesTotal - pagesFree) * hugepageSize,
    hugepages_size: hugepageSize,
    used: Math.max(0, total - available),
    total,
  };
  if (nodes.length === 0) delete memory.nodes;
  return memory;
}
