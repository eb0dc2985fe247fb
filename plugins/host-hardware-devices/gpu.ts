/**
 * The `gpu` device type with its four `gputype`s, validated as the reference does at add time:
 * physical (the default, and what an unknown gputype means there too) for containers and VMs,
 * mig for containers, mdev and sriov for VMs. A GPU is always required: a start without a
 * matching one on the host fails naming what is missing; with one present it fails too, since
 * this build does not pass GPUs through.
 */
import { badRequest, type DeviceConfig, type DeviceRunConfig, type DeviceStartContext, type DeviceType, type DeviceValidationContext } from '../../sdk/index.js';
import { gpuCards, type GpuCard } from './host-hardware.js';
import { byteRange, checkKnown, checkValues, deviceId, fileMode, notSupported, pciAddress, pciSysfsName, refuseOnVm, unixId, uuid, recheck } from './options.js';

const SELECTORS = ['vendorid', 'productid', 'id', 'pci'] as const;
const DEV_OWNER = ['uid', 'gid', 'mode'] as const;

const OPTIONS: Record<string, readonly string[]> = {
  physical: ['gputype', ...SELECTORS, ...DEV_OWNER],
  mig: ['gputype', ...SELECTORS, 'mig.ci', 'mig.gi', 'mig.uuid'],
  mdev: ['gputype', ...SELECTORS, 'mdev'],
  sriov: ['gputype', ...SELECTORS],
};

/** The reference treats any gputype it does not know as physical. */
export const gpuType = (config: DeviceConfig): string => (config.gputype && config.gputype in OPTIONS ? config.gputype : 'physical');

const set = (config: DeviceConfig, key: string) => config[key] !== undefined && config[key] !== '';

/** pci excludes the other selectors, and id excludes vendorid and productid. */
function checkSelectors(config: DeviceConfig): void {
  for (const [over, others] of [['pci', ['id', 'vendorid', 'productid']], ['id', ['vendorid', 'productid']]] as const) {
    if (!set(config, over)) continue;
    const clash = others.find((k) => set(config, k));
    if (clash) throw new Error(`option "${clash}" cannot be used together with "${over}"`);
  }
}

function describe(config: DeviceConfig): string {
  const parts = SELECTORS.filter((k) => set(config, k)).map((k) => `${k} ${config[k]}`);
  return parts.length ? parts.join(', ') : 'any GPU';
}

function matches(card: GpuCard, c: DeviceConfig): boolean {
  if (set(c, 'pci')) return card.pci === pciSysfsName(c.pci!);
  if (set(c, 'id')) return card.id === c.id;
  return (!set(c, 'vendorid') || card.vendorid === c.vendorid) && (!set(c, 'productid') || card.productid === c.productid);
}

export class GpuDevice implements DeviceType {
  readonly type = 'gpu';

  validate(config: DeviceConfig, ctx: DeviceValidationContext): void {
    const type = gpuType(config);
    const vm = ctx.instanceType === 'virtual-machine';
    if (ctx.instanceType === 'container' && (type === 'mdev' || type === 'sriov')) throw new Error(`gputype "${type}" is for virtual machines only`);
    if (vm && type === 'mig') throw new Error('gputype "mig" is for containers only');
    checkKnown(config, OPTIONS[type]!, `a gpu device of gputype "${type}"`);
    checkValues(config, {
      vendorid: deviceId, productid: deviceId, pci: pciAddress, uid: unixId, gid: unixId, mode: fileMode,
      'mig.ci': (v) => byteRange(v, 'MIG compute instance id'), 'mig.gi': (v) => byteRange(v, 'MIG GPU instance id'), 'mig.uuid': uuid,
    });
    if (type === 'mig') {
      if (set(config, 'mig.uuid')) {
        const clash = ['mig.ci', 'mig.gi'].find((k) => set(config, k));
        if (clash) throw new Error(`option "${clash}" cannot be used together with "mig.uuid"`);
      } else if (!set(config, 'mig.ci') || !set(config, 'mig.gi')) {
        throw new Error('gputype "mig" needs "mig.uuid", or both "mig.gi" and "mig.ci"');
      }
    }
    if (type === 'mdev' && !set(config, 'mdev')) throw new Error('gputype "mdev" needs "mdev" (the mediated device profile)');
    checkSelectors(config);
    refuseOnVm(config, DEV_OWNER, vm, 'a gpu device');
  }

  async start(ctx: DeviceStartContext): Promise<DeviceRunConfig> {
    recheck(this, ctx);
    const type = gpuType(ctx.config);
    const found = gpuCards().filter((card) => matches(card, ctx.config));
    if (!found.length) throw badRequest(`Device "${ctx.name}": no GPU on the host matches (${describe(ctx.config)}); gputype "${type}" needs one`);
    throw notSupported(`GPU (gputype "${type}")`, ctx.name, `matching GPU(s): ${found.map((f) => `${f.card} at ${f.pci || 'an unknown address'}`).join(', ')}`);
  }
}
