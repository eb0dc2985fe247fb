/**
 * Builds the whole resources document from one `HostReader`, so a file several sections look at
 * (a PCI device's driver, /proc/cpuinfo) is read once per request.
 */
import { collectCpu } from './cpu.js';
import { collectGpu } from './gpu.js';
import { collectMemory } from './memory.js';
import { collectNetwork } from './network.js';
import { collectPci } from './pci.js';
import { collectStorage } from './storage.js';
import { HostReader } from './sysfs.js';
import { collectSystem } from './system.js';
import type { ResourcesDoc } from './types.js';
import { collectUsb } from './usb.js';

export async function collectResources(host: HostReader = new HostReader()): Promise<ResourcesDoc> {
  const [cpu, memory, gpu, network, storage, usb, pci, system] = await Promise.all([
    collectCpu(host),
    collectMemory(host),
    collectGpu(host),
    collectNetwork(host),
    collectStorage(host),
    collectUsb(host),
    collectPci(host),
    collectSystem(host),
  ]);
  return { cpu, memory, gpu, network, storage, usb, pci, system };
}
