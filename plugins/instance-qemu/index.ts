/**
 * instance-qemu: virtual machines through QEMU, registered as the instances family's driver for
 * `virtual-machine` instances. At boot it asks QEMU its version and probes KVM in the background
 * (VMs start under TCG until the probe says KVM works).
 */
import { definePlugin, InstancesExtensionPointRef, type PluginContext } from '../../sdk/index.js';
import type { AgentConnector } from './agent/contract.js';
import { QemuDriver } from './driver.js';
import path from 'node:path';
import { hostKernel, probeKvm, probeQemu, qemuEnvironment, storedVerdict, storeVerdict, type AcceleratorVerdict, type QemuProbe } from './probe.js';
import { runRoot } from './run-dir.js';
import { tpmDevice } from './vm-tpm.js';

interface PluginState {
  driver: QemuDriver;
  probe?: QemuProbe;
  verdict: AcceleratorVerdict;
  probing?: Promise<void>;
}

/** Per kernel: several test kernels may load this module in one process. */
const states = new WeakMap<PluginContext, PluginState>();

const verdictFile = (ctx: PluginContext) => path.join(runRoot(ctx.dataDir), 'accelerator.json');

/** The agent helper's host side (agent/client.ts), when this build has it. */
async function loadAgentConnector(): Promise<AgentConnector | undefined> {
  const specifier = './agent/client.js';
  try {
    const mod = (await import(specifier)) as { connectAgent?: AgentConnector; default?: AgentConnector };
    return mod.connectAgent ?? mod.default;
  } catch {
    return undefined;
  }
}

export default definePlugin({
  register(ctx) {
    const state: PluginState = {
      verdict: { accelerator: 'tcg', reason: 'the KVM probe has not finished' },
    } as PluginState;
    const probeWith = (kernel: string | undefined) => {
      if (state.probing || process.env.CORRAL_QEMU_ACCEL === 'tcg') return;
      state.probing = probeKvm(ctx.hostTools, kernel).then(async (verdict) => {
        state.verdict = verdict;
        ctx.log.info({ ...verdict }, 'VM accelerator chosen');
        // Without a kernel to boot, the probe waits for the first VM's.
        if (!kernel && verdict.reason?.startsWith('no kernel')) state.probing = undefined;
        else if (state.probe) await storeVerdict(verdictFile(ctx), state.probe.version, verdict).catch((err) => ctx.log.warn({ err }, 'the accelerator verdict could not be kept'));
      });
    };
    state.driver = new QemuDriver({
      hostTools: ctx.hostTools, log: ctx.log, dataDir: ctx.dataDir,
      accelerator: () => state.verdict,
      unavailable: () => (state.probe && !state.probe.operational ? state.probe.reason ?? 'QEMU is not operational' : undefined),
      kernelSeen: (kernel) => probeWith(kernel),
      agent: () => connector,
    });
    let connector: AgentConnector | undefined;
    void loadAgentConnector().then((c) => { connector = c; });
    states.set(ctx, state);
    const instances = ctx.extensionPoints.get(InstancesExtensionPointRef);
    if (!instances) throw new Error('the instance-qemu plugin needs the "instances" extension point');
    instances.registerDriver(state.driver);
    instances.registerDeviceType(tpmDevice);
    ctx.hooks.environment.tap(qemuEnvironment(() => state.probe));
    (state as { startProbe?: typeof probeWith }).startProbe = probeWith;
  },

  async boot(ctx) {
    const state = states.get(ctx)!;
    state.probe = await probeQemu(ctx.hostTools);
    if (!state.probe.operational) {
      ctx.log.warn({ reason: state.probe.reason }, 'QEMU is not operational: virtual machines cannot start');
    } else {
      ctx.log.info({ version: state.probe.version }, 'QEMU driver ready');
      if (process.env.CORRAL_QEMU_ACCEL === 'tcg') state.verdict = { accelerator: 'tcg', reason: 'CORRAL_QEMU_ACCEL=tcg' };
      // In the background: a hanging KVM costs the probe's deadline, never the boot.
      else {
        const kept = await storedVerdict(verdictFile(ctx), state.probe.version);
        if (kept) {
          state.verdict = kept;
          state.probing = Promise.resolve();
        } else {
          void hostKernel().then((k) => (state as { startProbe?: (k?: string) => void }).startProbe?.(k));
        }
      }
    }
    ctx.refreshServerInfo();
  },
});
