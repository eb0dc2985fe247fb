/**
 * instance-lxc: system containers through liblxc (Debian's lxc tools), registered as the
 * instances family's driver for `container` instances.
 */
import { definePlugin, InstancesExtensionPointRef, type PluginContext } from '../../sdk/index.js';
import { LxcDriver } from './driver.js';
import { lxcEnvironment, probeLxc, type LxcProbe } from './probe.js';

/** Per kernel: several test kernels may load this module in one process. */
const drivers = new WeakMap<PluginContext, { driver: LxcDriver; probe?: LxcProbe; probing: Promise<LxcProbe> }>();

export default definePlugin({
  register(ctx) {
    const driver = new LxcDriver({ hostTools: ctx.hostTools, log: ctx.log, dataDir: ctx.dataDir });
    // The probe only reads (liblxc's version and feature names, ~15 ms of two tools on a first start):
    // started here, it runs while the plugins before this one boot, instead of holding the boots after it.
    const state: { driver: LxcDriver; probe?: LxcProbe; probing: Promise<LxcProbe> } = {
      driver,
      // Nothing may reject unheard before boot awaits it.
      probing: probeLxc(ctx.hostTools, driver.cgroups).catch((err: Error) => ({ operational: false, reason: `the probe failed: ${err.message}`, version: '', features: {} })),
    };
    drivers.set(ctx, state);
    const instances = ctx.extensionPoints.get(InstancesExtensionPointRef);
    if (!instances) throw new Error('the instance-lxc plugin needs the "instances" extension point');
    instances.registerDriver(driver);
    driver.notifyAvailable = () => state.probe?.features.seccomp_notify === 'true';
    ctx.hooks.environment.tap(lxcEnvironment(() => state.probe));
  },

  async boot(ctx) {
    const state = drivers.get(ctx)!;
    state.probe = await state.probing;
    if (!state.probe.operational) ctx.log.warn({ reason: state.probe.reason }, 'liblxc is not operational: containers cannot start');
    else ctx.log.info({ version: state.probe.version, lxcpath: state.driver.paths.lxcpath }, 'liblxc driver ready');
    ctx.refreshServerInfo();
    if (state.probe.operational) {
      await state.driver.resumeInterception().catch((err) => ctx.log.error({ err }, 'the seccomp proxy could not be started for running containers'));
    }
  },

  async shutdown(ctx) {
    drivers.get(ctx)?.driver.live.stop();
    await drivers.get(ctx)?.driver.interceptor.stop();
  },
});
