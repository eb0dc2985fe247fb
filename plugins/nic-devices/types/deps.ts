/** What the built-in nictypes share: host-side helpers, the port filters, the networks service, sysfs reads. */
import { readFileSync } from 'node:fs';
import { badRequest, type NetworksService, type NicStart } from '../../../sdk/index.js';
import type { PortFilters } from '../filtering.js';
import type { HostSide } from '../host-side.js';
import { generateHostName } from '../names.js';
import { hostInterfaceExists } from '../options.js';

export interface BuiltinDeps {
  host: HostSide;
  filters: PortFilters;
  /** Absent when the networks plugin is not enabled. */
  networks(): NetworksService | undefined;
}

export const readSys = (iface: string, file: string) => {
  try {
    return readFileSync(`/sys/class/net/${iface}/${file}`, 'utf8').trim();
  } catch {
    return undefined;
  }
};

/** A veth pair's host end: `host_name` or a generated name, recorded as `volatile.<dev>.host_name`. */
export function hostEnd(s: NicStart): void {
  const hostName = s.config.host_name || generateHostName();
  if (hostInterfaceExists(hostName)) throw badRequest(`Device "${s.name}": host interface "${hostName}" already exists`);
  s.nic.hostName = hostName;
  s.changes.host_name = hostName;
}

/** `<parent>.<vlan>` when the NIC asks for a VLAN (made here if missing, and then removed at stop). */
export async function vlanParent(deps: BuiltinDeps, s: NicStart): Promise<string> {
  if (!s.vlan) return s.parent!;
  const made = await deps.host.vlanParent(s.parent!, s.vlan, s.gvrp);
  if (made.created) s.changes['last_state.created'] = 'true';
  return made.name;
}
