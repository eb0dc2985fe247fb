/**
 * The `gpu` section: display controllers on PCI (class 0x03) and any device driving a DRM card
 * (/sys/class/drm/cardN, which also catches USB display adapters), with their DRM nodes, SR-IOV
 * virtual functions, mediated device types and, for NVIDIA's driver, what it publishes in
 * /proc/driver/nvidia.
 */
import path from 'node:path';
import { deviceIds, driverOf, numaNodeOf, pciAddressOf, usbAddressOf, usbDeviceOf } from './device.js';
import { pciIds, usbIds } from './ids.js';
import { HostReader, omitEmpty, parseColonBlocks } from './sysfs.js';
import type { GpuCard, GpuDrm, GpuMdev, GpuNvidia } from './types.js';

const DRM = '/sys/class/drm';
const PCI_DEVICES = '/sys/bus/pci/devices';
const NVIDIA = '/proc/driver/nvidia';

async function drmInfo(host: HostReader, device: string): Promise<GpuDrm | undefined> {
  const entries = await host.list(`${device}/drm`);
  const cardName = entries.find((e) => /^card\d+$/.test(e));
  if (!cardName) return undefined;
  const dev = async (name: string | undefined) => (name ? (await host.text(`${device}/drm/${name}/dev`)) ?? '' : '');
  const controlName = entries.find((e) => /^controlD\d+$/.test(e));
  const renderName = entries.find((e) => /^renderD\d+$/.test(e));
  const drm: GpuDrm = {
    id: Number(cardName.slice(4)),
    card_name: cardName,
    card_device: await dev(cardName),
    control_name: controlName ?? '',
    control_device: await dev(controlName),
    render_name: renderName ?? '',
    render_device: await dev(renderName),
  };
  return omitEmpty(drm, ['control_name', 'control_device', 'render_name', 'render_device']);
}

async function mdevTypes(host: HostReader, device: string): Promise<Record<string, GpuMdev>> {
  const dir = `${device}/mdev_supported_types`;
  const out: Record<string, GpuMdev> = {};
  for (const type of await host.list(dir)) {
    const [name, description, available, api, devices] = await Promise.all([
      host.text(`${dir}/${type}/name`),
      host.text(`${dir}/${type}/description`),
      host.int(`${dir}/${type}/available_instances`),
      host.text(`${dir}/${type}/device_api`),
      host.list(`${dir}/${type}/devices`),
    ]);
    out[type] = omitEmpty({ api: api ?? '', available: available ?? 0, name: name ?? '', description: description ?? '', devices }, ['name', 'description']);
  }
  return out;
}

/** What the NVIDIA kernel driver publishes about a GPU (/proc/driver/nvidia/gpus/<pci>/information). */
async function nvidiaInfo(host: HostReader, pciAddress: string): Promise<GpuNvidia | undefined> {
  if (!pciAddress) return undefined;
  const text = await host.raw(`${NVIDIA}/gpus/${pciAddress}/information`);
  if (text === undefined) return undefined;
  const info = parseColonBlocks(text)[0] ?? new Map<string, string>();
  const minor = info.get('Device Minor');
  const model = info.get('Model') ?? '';
  const version = (await host.text(`${NVIDIA}/version`)) ?? '';
  const nvrm = /Kernel Module\s+(?:for \S+\s+)?([0-9][\w.-]*)/.exec(version)?.[1] ?? '';
  const nvidia: GpuNvidia = {
    nvrm_version: nvrm,
    brand: model.split(/\s+/)[0] ?? '',
    model,
    uuid: info.get('GPU UUID') ?? '',
    card_name: minor === undefined ? '' : `nvidia${minor}`,
    card_device: minor === undefined ? '' : `195:${minor}`,
  };
  return omitEmpty(nvidia, ['nvrm_version', 'uuid']);
}

async function gpuCard(host: HostReader, device: string, vfsOf: (pf: string) => Promise<GpuCard[]>): Promise<GpuCard> {
  const pciAddress = pciAddressOf(device);
  const [drv, ids, numaNode, usbAddress, onUsb, drm, mdev, nvidia, pciDb, usbDb] = await Promise.all([
    driverOf(host, device),
    deviceIds(host, device),
    numaNodeOf(host, device),
    usbAddressOf(host, device),
    usbDeviceOf(host, device),
    drmInfo(host, device),
    mdevTypes(host, device),
    nvidiaInfo(host, path.basename(device) === pciAddress ? pciAddress : ''),
    pciIds(host),
    usbIds(host),
  ]);
  const names = onUsb ? usbDb : pciDb;
  const card: GpuCard = {
    driver: drv.driver,
    driver_version: drv.version,
    drm,
    nvidia,
    mdev,
    numa_node: numaNode,
    pci_address: pciAddress,
    vendor: names.vendor(ids.vendorId),
    vendor_id: ids.vendorId,
    product: names.product(ids.vendorId, ids.productId),
    product_id: ids.productId,
    usb_address: usbAddress,
  };
  if (path.basename(device) === pciAddress) {
    const [total, current] = await Promise.all([host.int(`${device}/sriov_totalvfs`), host.int(`${device}/sriov_numvfs`)]);
    if (total !== undefined && total > 0) card.sriov = { current_vfs: current ?? 0, maximum_vfs: total, vfs: await vfsOf(device) };
  }
  return omitEmpty(card, ['driver', 'driver_version', 'drm', 'sriov', 'nvidia', 'mdev', 'pci_address', 'vendor', 'vendor_id', 'product', 'product_id', 'usb_address']);
}

export async function collectGpu(host: HostReader): Promise<{ cards: GpuCard[]; total: number }> {
  const [drmEntries, pciAddresses] = await Promise.all([host.list(DRM), host.list(PCI_DEVICES)]);
  const devices: string[] = [];
  const add = (d: string | undefined) => {
    if (d && !devices.includes(d)) devices.push(d);
  };
  const classes = await Promise.all(pciAddresses.map((a) => host.hex(`${PCI_DEVICES}/${a}/class`)));
  const pciGpus = await Promise.all(pciAddresses.filter((_, i) => (classes[i] ?? 0) >> 16 === 0x03).map((a) => host.resolve(`${PCI_DEVICES}/${a}`)));
  pciGpus.forEach(add);
  const drmDevices = await Promise.all(drmEntries.filter((e) => /^card\d+$/.test(e)).map((e) => host.resolve(`${DRM}/${e}/device`)));
  drmDevices.forEach(add);
  devices.sort();

  // Virtual functions are listed inside their physical function's card, not on their own.
  const nested = new Set<string>();
  const vfsOf = async (pf: string): Promise<GpuCard[]> => {
    const links = (await host.list(pf)).filter((e) => /^virtfn\d+$/.test(e));
    const vfs = (await Promise.all(links.map((l) => host.resolve(`${pf}/${l}`)))).filter((d): d is string => d !== undefined);
    vfs.forEach((vf) => nested.add(vf));
    return Promise.all(vfs.map((vf) => gpuCard(host, vf, vfsOf)));
  };
  const cards = await Promise.all(devices.map(async (d) => ({ device: d, card: await gpuCard(host, d, vfsOf) })));
  const top = cards.filter((c) => !nested.has(c.device)).map((c) => c.card);
  return { cards: top, total: top.length };
}
