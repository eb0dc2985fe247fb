/** The agent's state reply (guest/state.c) as the contract's GuestState. */
import type { NetworkState } from '../../../sdk/index.js';
import type { GuestState } from './contract.js';
import type { KvReply } from './kv.js';

export function parseGuestState(reply: KvReply): GuestState {
  const network: Record<string, NetworkState> = {};
  // net=name hwaddr mtu state type rx_bytes rx_packets rx_errors rx_dropped tx_bytes tx_packets tx_errors tx_dropped
  for (const line of reply.all('net')) {
    const [name, hwaddr, mtu, state, type, ...counters] = line.split(' ');
    if (!name || counters.length < 8) continue;
    const [rb, rp, re, rd, tb, tp, te, td] = counters.map(Number) as number[];
    network[name] = {
      addresses: [],
      counters: {
        bytes_received: rb!, packets_received: rp!, errors_received: re!, packets_dropped_inbound: rd!,
        bytes_sent: tb!, packets_sent: tp!, errors_sent: te!, packets_dropped_outbound: td!,
      },
      hwaddr: hwaddr === '-' ? '' : hwaddr ?? '',
      host_name: '',
      mtu: Number(mtu),
      state: state ?? 'down',
      type: type ?? 'broadcast',
    };
  }
  // addr=name family address prefix scope
  for (const line of reply.all('addr')) {
    const [name, family, address, netmask, scope] = line.split(' ');
    const iface = name ? network[name] : undefined;
    if (!iface || !family || !address || !netmask || !scope) continue;
    iface.addresses.push({ family, address, netmask, scope });
  }
  return {
    processes: reply.number('processes'),
    memory: { usage: reply.number('memory_usage'), total: reply.number('memory_total') },
    cpuNs: reply.number('cpu_ns'),
    network,
  };
}
