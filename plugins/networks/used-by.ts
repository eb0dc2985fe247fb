/**
 * What uses a network: instances and profiles whose `nic` devices name it (`network=`, or the
 * bridge as `parent=` the way older configs do). Read through the instances and profiles services
 * when they are in the build; NIC device types come later and need nothing more here.
 */
import {
  featureProjectOf, InstancesServiceRef, instanceUrl, ProfilesServiceRef, resourceUrl,
  type DeviceConfig, type ServiceRegistry, type UsedByRegistry,
} from '../../sdk/index.js';

const usesNetwork = (devices: Record<string, DeviceConfig>, name: string): boolean =>
  Object.values(devices).some((d) => d.type === 'nic' && (d.network === name || (!d.network && d.parent === name)));

export function addDeviceUsers(usedBy: UsedByRegistry, services: ServiceRegistry): void {
  usedBy.add(async (project, name, memo) => {
    const instances = services.get(InstancesServiceRef);
    if (!instances) return [];
    const out: string[] = [];
    for (const inst of await memo.get('instances', () => instances.list())) {
      if (!usesNetwork(inst.expandedDevices, name)) continue;
      if ((await featureProjectOf(services, inst.project, 'networks')) === project) out.push(instanceUrl(inst.project, inst.name));
    }
    return out;
  });
  usedBy.add(async (project, name, memo) => {
    const profiles = services.get(ProfilesServiceRef);
    if (!profiles) return [];
    return (await memo.get(`profiles:${project}`, () => profiles.list(project))).filter((p) => usesNetwork(p.devices, name)).map((p) => resourceUrl(`/1.0/profiles/${encodeURIComponent(p.name)}`, project));
  });
}
