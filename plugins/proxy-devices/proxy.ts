/**
 * The `proxy` device type: forwards connections between the host and an instance through a
 * forwarder process per device (forwarder.ts), started once the instance runs and stopped with
 * it (or when the device goes away). What runs is recorded in a small file per device, so a
 * restarted daemon still finds and stops it. In NAT mode there is no process: DNAT rules (nat.ts).
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  badRequest, isBool, isUint, truthy,
  type DeviceConfig, type DeviceRunningContext, type DeviceStartContext, type DeviceType, type DeviceValidationContext, type PluginContext,
} from '../../sdk/index.js';
import { parseProxyAddress } from './address.js';
import { processStart, type ForwarderConfig } from './forwarder.js';
import { mapToHost } from './idmap.js';
import { checkNatOptions, natTarget, NatRules } from './nat.js';

const OPTIONS = ['listen', 'connect', 'bind', 'nat', 'proxy_protocol', 'uid', 'gid', 'mode', 'security.uid', 'security.gid'];
const FORWARDER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'forwarder.js');
const READY_TIMEOUT_MS = 10_000;

interface Recorded {
  pid: number;
  start: string;
}

export function checkProxy(config: DeviceConfig): void {
  for (const key of Object.keys(config)) {
    if (key !== 'type' && !OPTIONS.includes(key) && !key.startsWith('user.')) throw new Error(`unknown option "${key}"`);
  }
  if (!config.listen) throw new Error('missing "listen"');
  if (!config.connect) throw new Error('missing "connect"');
  const listen = parseProxyAddress(config.listen, 'listen');
  const connect = parseProxyAddress(config.connect, 'connect');
  if (config.bind !== undefined && config.bind !== 'host' && config.bind !== 'instance') throw new Error(`"bind" must be "host" or "instance", got "${config.bind}"`);
  for (const flag of ['nat', 'proxy_protocol']) if (config[flag] !== undefined) isBool(config[flag]);
  for (const id of ['uid', 'gid', 'security.uid', 'security.gid']) if (config[id] !== undefined) isUint(config[id]);
  if (config.mode !== undefined && !/^0?[0-7]{3}$/.test(config.mode)) throw new Error(`"mode" must be an octal file mode such as 0644, got "${config.mode}"`);
  if (listen.protocol !== 'unix' && connect.protocol !== 'unix' && connect.ports.length !== 1 && connect.ports.length !== listen.ports.length) {
    throw new Error(`the connect ports (${connect.ports.length}) must be one port or as many as the listen ports (${listen.ports.length})`);
  }
  if (listen.protocol === 'unix' && connect.protocol !== 'unix' && connect.ports.length !== 1) throw new Error('a unix listener connects to a single port');
  if ((config.uid || config.gid || config.mode) && (listen.protocol !== 'unix' || listen.abstract)) {
    throw new Error('"uid", "gid" and "mode" apply to a unix socket path as the listen address only');
  }
  if (truthy(config.proxy_protocol) && connect.protocol === 'udp') throw new Error('"proxy_protocol" needs a tcp or unix connect address');
  if (truthy(config.nat)) {
    checkNatOptions(config, listen, connect);
    const extra = ['uid', 'gid', 'mode', 'security.uid', 'security.gid'].filter((k) => config[k]);
    if (truthy(config.proxy_protocol)) extra.push('proxy_protocol');
    if (extra.length) throw new Error(`"${extra[0]}" does not apply in "nat" mode`);
  }
}

export class ProxyDevice implements DeviceType {
  readonly type = 'proxy';
  readonly hotplug = true;

  private readonly nat: NatRules;

  constructor(private readonly ctx: PluginContext) {
    this.nat = new NatRules(ctx.hostTools, ctx.dataDir);
  }

  /** Unique on the host: daemons with other data directories may hold a device of the same name. */
  private key(ctx: DeviceStartContext): string {
    return `${this.ctx.dataDir}:${ctx.project}/${ctx.instanceName}/${ctx.name}`;
  }

  validate(config: DeviceConfig, _ctx: DeviceValidationContext): void {
    checkProxy(config);
  }

  private recordFile(ctx: DeviceStartContext): string {
    return path.join(this.ctx.dataDir, 'devices', 'proxy', `${ctx.project}_${ctx.instanceName}.${ctx.name}.json`);
  }

  async start(): Promise<Record<string, never>> {
    return {};
  }

  async started(ctx: DeviceRunningContext): Promise<void> {
    await this.stop(ctx);
    const c = ctx.config;
    if (truthy(c.nat)) {
      const connect = parseProxyAddress(c.connect!, 'connect');
      await this.nat.apply(this.key(ctx), parseProxyAddress(c.listen!, 'listen'), connect, natTarget(connect, ctx.devices ?? {}));
      return;
    }
    const bind = (c.bind ?? 'host') as 'host' | 'instance';
    const pidStart = processStart(ctx.pid);
    if (!pidStart) throw badRequest('The instance is not running');
    const num = (v: string | undefined) => (v === undefined || v === '' ? undefined : Number(v));
    // uid and gid of a socket inside the instance are the instance's ids: its id map places them on the host.
    const owner = (v: string | undefined, kind: 'uid' | 'gid') => {
      const id = num(v);
      return id === undefined || bind === 'host' ? id : mapToHost(ctx.pid, kind, id);
    };
    const cfg: ForwarderConfig = {
      listen: c.listen!, connect: c.connect!, bind, pid: ctx.pid, pidStart,
      proxyProtocol: truthy(c.proxy_protocol),
      uid: owner(c.uid, 'uid'), gid: owner(c.gid, 'gid'), mode: c.mode ? parseInt(c.mode, 8) : undefined,
      securityUid: num(c['security.uid']), securityGid: num(c['security.gid']),
    };
    const proc = this.ctx.hostTools.spawn(process.execPath, [FORWARDER, JSON.stringify(cfg)], { cwd: '/' });
    proc.stdin.end();
    let out = '';
    let err = '';
    proc.stderr?.on('data', (b: Buffer) => (err += b.toString()));
    const ready = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), READY_TIMEOUT_MS);
      proc.stdout.on('data', (b: Buffer) => {
        out += b.toString();
        if (out.includes('ready\n')) {
          clearTimeout(timer);
          resolve(true);
        }
      });
      void proc.exited.then(() => {
        clearTimeout(timer);
        resolve(false);
      });
    });
    if (!ready) {
      proc.kill('SIGKILL');
      throw badRequest(`Proxy device "${ctx.name}" could not start: ${err.trim() || 'the forwarder did not become ready'}`);
    }
    // Keep draining: the forwarder writes nothing more, but a full pipe must never block it.
    proc.stdout.resume();
    proc.stderr?.resume();
    const file = this.recordFile(ctx);
    mkdirSync(path.dirname(file), { recursive: true });
    const record: Recorded = { pid: proc.pid, start: processStart(proc.pid) ?? '' };
    writeFileSync(file, JSON.stringify(record));
  }

  async stop(ctx: DeviceStartContext): Promise<void> {
    if (truthy(ctx.config.nat)) await this.nat.remove(this.key(ctx));
    const file = this.recordFile(ctx);
    let rec: Recorded | undefined;
    try {
      rec = JSON.parse(readFileSync(file, 'utf8')) as Recorded;
    } catch {
      return;
    }
    if (rec.start && processStart(rec.pid) === rec.start) {
      try {
        process.kill(rec.pid, 'SIGTERM');
      } catch { /* gone already */ }
      const deadline = Date.now() + 3000;
      while (processStart(rec.pid) === rec.start && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      if (processStart(rec.pid) === rec.start) {
        try { process.kill(rec.pid, 'SIGKILL'); } catch { /* gone */ }
      }
    }
    rmSync(file, { force: true });
  }
}
