/**
 * A vendor NIC type, kept outside plugins/ as the template for third parties: nictype `example`,
 * a veth pair whose host end stays on its own (named by `host_name`, or `vex` and random hex) and
 * is labelled on the host with the instance and device it serves (`ip link ... alias`), so an
 * operator can tell it apart. It is one folder plus its entry in plugin-registry.json
 * (`nic-example`, `provides.registers["nic-type"]`): nothing in nic-devices, the sdk or the
 * instance driver names it. It runs the NIC type conformance suite in
 * test/plugins/nic-conformance-example.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  badRequest, definePlugin, NicTypesExtensionPointRef,
  type DeviceConfig, type DeviceRunningContext, type HostTools, type NicStart, type NicType,
} from '../../sdk/index.js';

const INTERFACE_NAME = /^[A-Za-z0-9_.@+-]{1,15}$/;

export class ExampleNicType implements NicType {
  readonly nictype = 'example';
  readonly options = ['host_name'];

  constructor(private readonly tools: HostTools) {}

  validate(config: DeviceConfig): void {
    const hostName = config.host_name;
    if (hostName !== undefined && !INTERFACE_NAME.test(hostName)) throw new Error(`"host_name" "${hostName}" is not an interface name of 1 to 15 characters`);
  }

  async start(s: NicStart): Promise<void> {
    const hostName = s.config.host_name || `vex${randomBytes(4).toString('hex')}`;
    if (existsSync(`/sys/class/net/${hostName}`)) throw badRequest(`Device "${s.name}": host interface "${hostName}" already exists`);
    // The instance driver makes the pair; the nic device removes a host end left behind at stop.
    s.nic.hostName = hostName;
    s.changes.host_name = hostName;
  }

  async started(ctx: DeviceRunningContext): Promise<void> {
    const hostName = ctx.run.nics?.[0]?.hostName;
    if (!hostName) return;
    const r = await this.tools.run('ip', ['link', 'set', 'dev', hostName, 'alias', `${ctx.project}/${ctx.instanceName}/${ctx.name}`], { allowFailure: true, timeoutMs: 10_000 });
    if (r.exitCode !== 0) throw badRequest(`Device "${ctx.name}": labelling the host end failed: ${r.stderr.trim()}`);
  }
}

export default definePlugin({
  register(ctx) {
    const nicTypes = ctx.extensionPoints.get(NicTypesExtensionPointRef);
    if (!nicTypes) throw new Error('the nic-example plugin needs the "nic-types" extension point (nic-devices)');
    nicTypes.registerNicType(new ExampleNicType(ctx.hostTools));
  },
});
