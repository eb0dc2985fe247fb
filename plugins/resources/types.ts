/**
 * The shape of the `GET /1.0/resources` document (LXD 5.0 field names). Optional fields are the
 * ones the reference leaves out when empty; the others are always present.
 */

export interface ResourcesDoc {
  cpu: CpuResources;
  memory: MemoryResources;
  gpu: { cards: GpuCard[]; total: number };
  network: { cards: NetworkCard[]; total: number };
  storage: { disks: StorageDisk[]; total: number };
  usb: { devices: UsbDevice[]; total: number };
  pci: { devices: PciDevice[]; total: number };
  system: SystemInfo;
}

export interface CpuResources {
  architecture: string;
  sockets: CpuSocket[];
  total: number;
}

export interface CpuSocket {
  name?: string;
  vendor?: string;
  socket: number;
  cache?: CpuCache[];
  cores: CpuCore[];
  /** MHz */
  frequency?: number;
  frequency_minimum?: number;
  frequency_turbo?: number;
}

export interface CpuCache {
  level: number;
  type: string;
  size: number;
}

export interface CpuCore {
  core: number;
  die: number;
  threads: CpuThread[];
  frequency?: number;
}

export interface CpuThread {
  id: number;
  numa_node: number;
  thread: number;
  online: boolean;
  isolated: boolean;
}

export interface MemoryResources {
  nodes?: MemoryNode[];
  hugepages_total: number;
  hugepages_used: number;
  hugepages_size: number;
  used: number;
  total: number;
}

export interface MemoryNode {
  numa_node: number;
  hugepages_used: number;
  hugepages_total: number;
  used: number;
  total: number;
}

/** What every PCI or USB device card says about itself. */
export interface DeviceIdentity {
  driver?: string;
  driver_version?: string;
  numa_node: number;
  pci_address?: string;
  vendor?: string;
  vendor_id?: string;
  product?: string;
  product_id?: string;
  usb_address?: string;
}

export interface GpuCard extends DeviceIdentity {
  drm?: GpuDrm;
  sriov?: { current_vfs: number; maximum_vfs: number; vfs: GpuCard[] };
  nvidia?: GpuNvidia;
  mdev?: Record<string, GpuMdev>;
}

export interface GpuDrm {
  id: number;
  card_name: string;
  card_device: string;
  control_name?: string;
  control_device?: string;
  render_name?: string;
  render_device?: string;
}

export interface GpuNvidia {
  cuda_version?: string;
  nvrm_version?: string;
  brand: string;
  model: string;
  uuid?: string;
  architecture?: string;
  card_name: string;
  card_device: string;
}

export interface GpuMdev {
  api: string;
  available: number;
  name?: string;
  description?: string;
  devices: string[];
}

export interface NetworkCard extends DeviceIdentity {
  ports?: NetworkPort[];
  sriov?: { current_vfs: number; maximum_vfs: number; vfs: NetworkCard[] };
  firmware_version?: string;
}

export interface NetworkPort {
  id: string;
  address?: string;
  port: number;
  protocol: string;
  supported_modes?: string[];
  supported_ports?: string[];
  port_type?: string;
  transceiver_type?: string;
  auto_negotiation: boolean;
  link_detected: boolean;
  link_speed?: number;
  link_duplex?: string;
  infiniband?: InfinibandPort;
}

export interface InfinibandPort {
  issm_name?: string;
  issm_device?: string;
  mad_name?: string;
  mad_device?: string;
  verb_name?: string;
  verb_device?: string;
}

export interface StorageDisk {
  id: string;
  device: string;
  model?: string;
  type?: string;
  read_only: boolean;
  size: number;
  removable: boolean;
  wwn?: string;
  numa_node: number;
  device_path?: string;
  block_size: number;
  firmware_version?: string;
  rpm: number;
  serial?: string;
  device_id: string;
  partitions: StoragePartition[];
  pci_address?: string;
  usb_address?: string;
}

export interface StoragePartition {
  id: string;
  device: string;
  read_only: boolean;
  size: number;
  partition: number;
}

export interface UsbDevice {
  bus_address: number;
  device_address: number;
  interfaces: UsbInterface[];
  vendor: string;
  vendor_id: string;
  product: string;
  product_id: string;
  /** Mbit/s */
  speed: number;
}

export interface UsbInterface {
  class: string;
  class_id: number;
  driver: string;
  driver_version: string;
  number: number;
  subclass: string;
  subclass_id: number;
}

export interface PciDevice {
  driver: string;
  driver_version: string;
  numa_node: number;
  pci_address: string;
  vendor: string;
  vendor_id: string;
  product: string;
  product_id: string;
  iommu_group: number;
  vpd: { product_name?: string; entries?: Record<string, string> };
}

export interface SystemInfo {
  uuid: string;
  vendor: string;
  product: string;
  family: string;
  version: string;
  sku: string;
  serial: string;
  type: string;
  firmware: { vendor: string; date: string; version: string } | null;
  chassis: { vendor: string; type: string; serial: string; version: string } | null;
  motherboard: { vendor: string; product: string; serial: string; version: string } | null;
}
