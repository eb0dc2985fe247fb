/** What this host already routes or owns (read once per check), for picking and vetting subnets. */
import type { HostTools } from '../../sdk/index.js';
import { parseCidr, parseIp, type Cidr } from './cidr.js';

export interface HostRoute {
  subnet: Cidr;
  dev: string;
}

interface IpRoute {
  dst: string;
  dev?: string;
  type?: string;
}

/** Every non-default route of every table, local addresses included; multicast and link-local left out. */
export async function hostRoutes(tools: HostTools): Promise<HostRoute[]> {
  const [v4, v6] = await Promise.all(['-4', '-6'].map((fam) => tools.run('ip', ['-j', fam, 'route', 'show', 'table', 'all'], { timeoutMs: 10000 })));
  const out: HostRoute[] = [];
  for (const res of [v4!, v6!]) {
    for (const r of JSON.parse(res.stdout || '[]') as IpRoute[]) {
      if (!r.dst || r.dst === 'default' || r.type === 'multicast') continue;
      const subnet = r.dst.includes('/') ? parseCidr(r.dst) : (() => {
        const ip = parseIp(r.dst);
        return ip && { family: ip.family, address: ip.value, prefix: ip.family === 4 ? 32 : 128 };
      })();
      if (!subnet) continue;
      if (subnet.family === 6 && (subnet.address >> 118n) === 0x3fan) continue; // fe80::/10
      if (subnet.family === 6 && (subnet.address >> 120n) === 0xffn) continue; // ff00::/8
      out.push({ subnet, dev: r.dev ?? '' });
    }
  }
  return out;
}
