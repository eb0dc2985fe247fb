/**
 * instance-qemu: virtual machines through QEMU, registered as the instances family's driver for
 * `virtual-machine` instances. At boot it asks QEMU its version and chooses the accelerator
 * (accelerator.ts: TCG until a KVM probe boot works).
 */
import { definePlugin, InstancesExtensionPointRef, type PluginContext } from '../../sdk/index.js';
import type { AgentConnector } from './agent/contract.js';
import { AcceleratorChoice } from './accelerator.js';
import { QemuDriver } from './driver.js';
import { probeQemu, qemuEnvironment, type QemuProbe } from './probe.js';
import { runRoot } from './run-dir.js';
import { tpmDevice } from './vm-tpm.js';

interface PluginState {
  driver: QemuDriver;
  accelerator: AcceleratorChoice;
  probe?: QemuProbe;
}

/** Per kernel: several test kernels may load this module in one process. */
const states = new WeakMap<PluginContext, PluginState>();

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
    const accelerator = new AcceleratorChoice(ctx.hostTools, ctx.log, runRoot(ctx.dataDir));
    let connector: AgentConnector | undefined;
    void loadAgentConnector().then((c) => { connector = c; });
    const state: PluginState = {
      accelerator,
      driver: new QemuDriver({
        hostTools: ctx.hostTools, log: ctx.log, dataDir: ctx.dataDir,
        accelerator: () => accelerator.verdict,
        unavailable: () => (state.probe && !state.probe.operational ? state.probe.reason ?? 'QEMU is not operational' : undefined),
        kernelSeen: (kernel) => accelerator.probe(kernel),
        agent: () => connector,
      }),
    };
    states.set(ctx, state);
    const instances = ctx.extensionPoints.get(InstancesExtensionPointRef);
    if (!instances) throw new Error('the instance-qemu plugin needs the "instances" extension point');
    instances.registerDriver(state.driver);
    instances.registerDeviceType(tpmDevice);
    ctx.hooks.environment.tap(qemuEnvironment(() => state.probe));
  },

  async boot(ctx) {
    const state = states.get(ctx)!;
    state.probe = await probeQemu(ctx.hostTools);
    if (!state.probe.operational) {
      ctx.log.warn({ reason: state.probe.reason }, 'QEMU is not operational: virtual machines cannot start');
    } else {
      ctx.log.info({ version: state.probe.version }, 'QEMU driver ready');
      await state.accelerator.boot(state.probe.version);
    }
    ctx.refreshServerInfo();
  },
});
