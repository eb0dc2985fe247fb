/**
 * The liblxc instance driver: containers run under the daemon's own lxcpath through Debian's lxc
 * tools, daemonized (`lxc-start -d`) so that they outlive the daemon. Nothing here depends on
 * memory a restart loses: what runs is read back from the monitor pid files and /proc.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { chmod, mkdir, open, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { totalmem } from 'node:os';
import path from 'node:path';
import {
  ApiError, badRequest, conflict, internalError,
  type ConfigKeyDescriptor, type ConsoleSession, type DeviceRunConfig, type DriverInstance, type ExecSession, type ExecSpec,
  type HostTools, type InstanceDriver, type InstanceMetrics, type InstanceStatus, type RuntimeState, type UnixNode,
} from '../../sdk/index.js';
import { CgroupHost, readText } from './cgroups.js';
import { ALLOWED_DEVICES, renderConfig } from './config-file.js';
import { startConsole } from './console-session.js';
import { startExec } from './exec-session.js';
import {
  allocateRange, checkDelegated, heldRange, holdsOwnRange, idmapJson, ISOLATED_SIZE, overlaps, parseIdmapJson, parseRawIdmap, planIdmap, readSubidRanges, readSubordinateIds,
  type IdRange, type IdmapPlan, type SubordinateIds,
} from './idmap.js';
import { configuredHaltSignal, repeatHaltWhileYoung } from './halt-repeat.js';
import { LXC_KEYS } from './keys.js';
import { cgroupLimit, formatCpuList, LIMIT_KEYS, parseCpuList, parseMemory, parseOnlineCpus, startLimits, unlimitedValue, type HostCapacity } from './limits.js';
import { BlockDeviceNames, metricsFiles, readMetrics } from './metrics.js';
import { MonitorTable, monitorProcesses } from './monitor.js';
import { InjectionFailure, MountInjector, type RecordedMount } from './mount-injection.js';
import { NicPlumber, type RecordedNic } from './nics.js';
import { LxcPaths, lxcName } from './paths.js';
import { readList, writeList } from './recorded-list.js';
import { checkRawLxc } from './raw-lxc.js';
import { liblxcRefusal } from './raw-lxc-verdict.js';
import { runningState, stateFiles, stoppedState } from './runtime-state.js';
import { LiveStateReader } from './live-state.js';
import { runTool } from './tool.js';
import { refuseShift } from './shift-protection.js';
import { checkHugepages, HUGEPAGE_KEYS, HUGEPAGE_PREFIX, hugepageLimit, hugepagesUnsupported, setHugepages } from './hugepages.js';
import { checkKernelLimit, KERNEL_LIMIT_PREFIX } from './kernel-limits.js';
import { lockInstanceDir, rootOwner, statInPlace } from './instance-dir.js';
import { checkSyscallConfig, interceptionPolicy, intercepts, seccompProfile } from './seccomp-profile.js';
import { SyscallInterceptor } from './syscall-intercept.js';
import { realtimeBudget } from './realtime-budget.js';
import type { DriverLog } from './driver-log.js';
import { bindMount, cgroupRule, checkRuleWritable, UnixNodeMaker, writeCgroupRule, type RecordedUnixNode } from './unix-nodes.js';

/** Read only at a start: stored while running and in effect from the next start, as the reference does. */
const NEXT_START_KEYS = new Set(['security.nesting', 'security.protection.shift']);

/** The logger methods the driver uses (a bunyan logger in the daemon). */
export type { DriverLog } from './driver-log.js';

export interface LxcDriverOptions {
  hostTools: HostTools;
  log: DriverLog;
  dataDir: string;
}

const START_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 30_000;
/** How long a liblxc monitor may take to exit after its container stopped. */
const MONITOR_EXIT_MS = 2_000;

/** Volatile keys a start leaves behind (the map in effect). */
export type StartResult = Record<string, string>;

export class LxcDriver implements InstanceDriver {
  readonly type = 'container' as const;
  readonly name = 'lxc';
  readonly configKeys: ConfigKeyDescriptor[] = LXC_KEYS;
  readonly paths: LxcPaths;
  readonly cgroups: CgroupHost;
  private readonly monitors: MonitorTable;
  private subids?: SubordinateIds;
  private capacity?: HostCapacity;
  /** Directories already given search permission (see traversable()). */
  private readonly searchable = new Set<string>();
  private readonly blockDevices = new BlockDeviceNames();
  private readonly plumber: NicPlumber;
  private readonly injector: MountInjector;
  readonly interceptor: SyscallInterceptor;
  /** Whether liblxc can forward seccomp notifications (its `seccomp_notify` feature), set at boot. */
  notifyAvailable: () => boolean = () => true;
  private readonly nodeMaker: UnixNodeMaker;
  /** Reads running containers' counters and interfaces (stopped at the plugin's shutdown). */
  readonly live: LiveStateReader;
  /** `<dataDir>/devices/unix`: a directory of device nodes per container. */
  private readonly unixNodesRoot: string;

  constructor(private readonly opts: LxcDriverOptions) {
    this.paths = new LxcPaths(path.join(opts.dataDir, 'containers'));
    this.cgroups = CgroupHost.read();
    this.monitors = new MonitorTable(this.paths, this.cgroups);
    this.plumber = new NicPlumber(opts.hostTools);
    this.injector = new MountInjector(opts.hostTools);
    this.interceptor = new SyscallInterceptor(path.join(opts.dataDir, 'seccomp.socket'), this.paths.lxcpath, opts.log);
    this.nodeMaker = new UnixNodeMaker(opts.hostTools);
    this.live = new LiveStateReader(opts.hostTools);
    this.unixNodesRoot = path.join(opts.dataDir, 'devices', 'unix');
  }

  private ids(): SubordinateIds {
    return (this.subids ??= readSubordinateIds());
  }

  /** Read at each start: an admin may add entries (for raw.idmap) while the daemon runs. */
  private delegated(): { uid: IdRange[]; gid: IdRange[] } {
    return { uid: readSubidRanges('/etc/subuid'), gid: readSubidRanges('/etc/subgid') };
  }

  private host(): HostCapacity {
    return (this.capacity ??= { totalMemory: totalmem(), cpus: parseOnlineCpus(readText('/sys/devices/system/cpu/online') ?? '0') });
  }

  /** Host ids an isolated map may come from: where root's uid and gid ranges overlap. */
  private isolatedRange(): IdRange {
    const { uid, gid } = this.ids();
    const start = Math.max(uid.start, gid.start);
    const end = Math.min(uid.start + uid.size, gid.start + gid.size);
    return { start, size: Math.max(0, end - start) };
  }

  private nameOf(inst: DriverInstance): string {
    return lxcName(inst.project, inst.name);
  }

  /** What the key registry cannot see (the whole config), then liblxc's own verdict on raw.lxc. */
  async validate(config: Record<string, string>): Promise<void> {
    this.checkConfig(config);
    const raw = config['raw.lxc'];
    if (!raw) return;
    const refusal = await liblxcRefusal(this.opts.hostTools, raw).catch((err: Error) => {
      // Without lxc-info the lines are judged at the next start instead.
      this.opts.log.warn({ err }, 'liblxc could not be asked about raw.lxc');
      return undefined;
    });
    if (refusal) throw badRequest(`Invalid value for "raw.lxc": ${refusal}`);
  }

  private checkConfig(config: Record<string, string>): void {
    const check = (key: string, fn: (v: string) => void) => {
      const v = config[key];
      if (!v) return;
      try {
        fn(v);
      } catch (err) {
        throw badRequest(`Invalid value for "${key}": ${(err as Error).message}`);
      }
    };
    check('raw.lxc', checkRawLxc);
    check('raw.idmap', (v) => void parseRawIdmap(v));
    check('limits.memory', (v) => void parseMemory(v, this.host().totalMemory));
    check('limits.cpu', (v) => void parseCpuList(v));
    check('limits.processes', (v) => {
      if (!/^-?\d+$/.test(v)) throw new Error(`Invalid value for an integer "${v}"`);
    });
    for (const key of HUGEPAGE_KEYS) {
      check(key, (v) => {
        checkHugepages(v);
        const why = hugepagesUnsupported(key, this.cgroups);
        if (why) throw new Error(`huge page limits cannot apply here: ${why}`);
      });
    }
    for (const key of Object.keys(config)) {
      if (key.startsWith(KERNEL_LIMIT_PREFIX)) check(key, (v) => checkKernelLimit(key, v));
    }
    check('security.idmap.size', (v) => {
      if (!/^\d+$/.test(v) || Number(v) === 0) throw new Error(`Invalid value for uint32 "${v}"`);
    });
    checkSyscallConfig(config);
  }

  /** A hugepage limit on a hybrid host needs hugetlb enabled on the unified hierarchy first. */
  private delegateHugetlb(): void {
    if (this.cgroups.versionOf('hugetlb') !== 2 || this.cgroups.pureV2) return;
    try {
      this.cgroups.delegateUnified('hugetlb');
    } catch (err) {
      throw badRequest(`Huge page limits cannot apply: enabling the hugetlb controller failed (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  }

  /** The id map plan; `taken` lists host ranges other isolated instances hold. */
  private plan(config: Record<string, string>, taken: () => IdRange[]): IdmapPlan {
    try {
      return planIdmap(config, this.ids(), () => {
        if (config['security.idmap.base']) return Number(config['security.idmap.base']);
        const size = Number(config['security.idmap.size'] || ISOLATED_SIZE);
        const held = taken();
        const current = Number(config['volatile.idmap.base'] || 0);
        if (current && !held.some((t) => overlaps(t, { start: current, size }))) return current;
        return allocateRange(this.isolatedRange(), size, held);
      });
    } catch (err) {
      throw err instanceof ApiError ? err : badRequest((err as Error).message);
    }
  }

  private static volatileKeys(plan: IdmapPlan): Record<string, string> {
    return {
      'volatile.idmap.base': String(plan.base),
      'volatile.idmap.next': plan.privileged ? '[]' : idmapJson(plan.map),
      // The rootfs is mounted idmapped, never shifted on disk.
      'volatile.last_state.idmap': '[]',
    };
  }

  async initialize(inst: DriverInstance, existing: DriverInstance[]): Promise<Record<string, string>> {
    const plan = this.plan(inst.config, () => existing
      .filter((e) => !(e.project === inst.project && e.name === inst.name) && holdsOwnRange(e.config))
      .map((e) => heldRange(e.config))
      .filter((r): r is IdRange => r !== undefined));
    return LxcDriver.volatileKeys(plan);
  }

  /**
   * The instance directory's owner and mode for the map the config asks for: after a create, a
   * config change (security.privileged, raw.idmap...) and at boot, as well as at every start.
   */
  async secureFiles(inst: DriverInstance): Promise<void> {
    let owner = { uid: 0, gid: 0 };
    try {
      owner = rootOwner(this.plan(inst.config, () => this.recordedRanges(this.nameOf(inst))));
    } catch (err) {
      // No map can be made now (the start will say why): only root may enter meanwhile.
      this.opts.log.debug({ err, instance: inst.name }, 'no id map for the instance directory owner');
    }
    await lockInstanceDir(inst.volumePath, owner);
  }

  /** Isolated ranges of the instances this driver has started (recorded in their directories). */
  private recordedRanges(except: string): IdRange[] {
    const out: IdRange[] = [];
    let names: string[] = [];
    try {
      names = readdirSync(this.paths.lxcpath);
    } catch {
      return out;
    }
    for (const name of names) {
      if (name === except) continue;
      try {
        const rec = JSON.parse(readFileSync(this.paths.idmapFile(name), 'utf8')) as { range?: IdRange };
        if (rec.range) out.push(rec.range);
      } catch { /* none recorded */ }
    }
    return out;
  }

  /** Start the container; resolves with the volatile id map keys now in effect. */
  async start(inst: DriverInstance, devices: DeviceRunConfig[]): Promise<StartResult> {
    const name = this.nameOf(inst);
    if (this.monitors.find(name)) throw badRequest('The instance is already running');
    this.checkConfig(inst.config);
    const plan = this.plan(inst.config, () => this.recordedRanges(name));
    refuseShift(inst.config, plan);
    const delegated = this.delegated();
    try {
      // Without any subid entry for root, liblxc writes the maps itself and anything goes.
      if (delegated.uid.length || delegated.gid.length) checkDelegated(plan.map, delegated);
    } catch (err) {
      throw badRequest((err as Error).message);
    }
    if (HUGEPAGE_KEYS.some((k) => inst.config[k])) this.delegateHugetlb();
    const rootfs = devices.find((d) => d.rootfs)?.rootfs?.path ?? path.join(inst.volumePath, 'rootfs');
    await Promise.all([this.containerDir(name), mkdir(inst.logDir, { recursive: true })]);
    const unixNodes = await this.makeUnixNodes(name, devices, plan);
    try {
      return await this.launch(inst, name, devices, plan, rootfs, unixNodes);
    } catch (err) {
      // Whatever failed once the nodes were made, none of them stays on the host.
      await this.removeUnixNodes(name);
      throw err;
    }
  }

  /** The config written and liblxc started, once the device nodes are there. */
  private async launch(inst: DriverInstance, name: string, devices: DeviceRunConfig[], plan: IdmapPlan, rootfs: string, unixNodes: RecordedUnixNode[]): Promise<StartResult> {
    const hugepages = setHugepages(inst.config);
    const profile = seccompProfile(inst.config, inst.architecture);
    const intercepted = intercepts(inst.config);
    // liblxc connects to the proxy while it starts the container: the proxy must listen first.
    if (intercepted && !this.notifyAvailable()) {
      throw badRequest('Syscall interception (security.syscalls.intercept.*) needs a liblxc with seccomp notify support, which this host lacks');
    }
    if (intercepted) await this.interceptor.ensure();
    const text = renderConfig({
      inst,
      rootfs,
      mounts: devices.flatMap((d) => d.mounts ?? []),
      nics: devices.flatMap((d) => d.nics ?? []),
      unixNodes,
      idmap: plan,
      limits: [...startLimits(inst.config, this.host(), name), ...Object.entries(hugepages).map(([k, v]) => hugepageLimit(k, v)), ...realtimeBudget(inst.config, this.cgroups)],
      cgroups: this.cgroups,
      seccomp: profile === undefined ? undefined : {
        profile: this.paths.seccompProfile(name),
        ...(intercepted ? { proxy: this.interceptor.socket, cookie: name } : {}),
      },
    });
    const policy = interceptionPolicy(inst.config);
    const configFile = this.paths.config(name);
    const idmapFile = this.paths.idmapFile(name);
    const idmapSize = plan.map.filter((e) => e.Hostid >= plan.base).reduce((end, e) => Math.max(end, e.Hostid + e.Maprange), plan.base) - plan.base;
    // The files of a start do not depend on one another: written at once, each its own file (all are
    // written again at the next start, so one left by a failure here does no harm).
    await Promise.all([
      profile !== undefined ? writeFile(this.paths.seccompProfile(name), profile) : rm(this.paths.seccompProfile(name), { force: true }),
      policy !== undefined ? writeFile(this.paths.seccompPolicy(name), policy, { mode: 0o600 }) : rm(this.paths.seccompPolicy(name), { force: true }),
      lockInstanceDir(inst.volumePath, rootOwner(plan)).then(() => (plan.privileged ? undefined : this.traversable(rootfs, inst.volumePath))),
      writeList<RecordedNic>(this.paths.nicsFile(name), devices.flatMap((d) => (d.nics ?? []).map((nic) => ({ device: d.device ?? '', nic, hotplugged: false })))),
      writeList<RecordedMount>(this.paths.mountsFile(name), devices.flatMap((d) => (d.mounts ?? []).map((m) => ({ device: d.device ?? '', target: m.target })))),
      writeFile(`${configFile}.new`, text).then(() => rename(`${configFile}.new`, configFile)),
      plan.base ? writeFile(idmapFile, JSON.stringify({ range: { start: plan.base, size: idmapSize } })) : rm(idmapFile, { force: true }),
    ]);

    const logFile = path.join(inst.logDir, 'lxc.log');
    const logOffset = fileSize(logFile);
    const result = await runTool(this.opts.hostTools, 'lxc-start', ['-n', name, '-P', this.paths.lxcpath, '-d', '-p', this.paths.pidFile(name)], START_TIMEOUT_MS)
      .catch((err: Error) => ({ exitCode: -1, stderr: err.message }));
    // Looked for afresh: a listing while lxc-start ran may have found no pid file yet.
    this.monitors.forget(name);
    const running = result.exitCode === 0 ? this.monitors.find(name) : undefined;
    if (!running) {
      await this.killLeftover(name);
      throw await this.startFailure(result.stderr, logFile, logOffset, Boolean(inst.config['raw.lxc']));
    }
    if (Object.keys(hugepages).length && !this.cgroups.pureV2) {
      // liblxc leaves `lxc.cgroup2.*` lines unapplied on a hybrid host: the limits are written here.
      try {
        if (!this.monitors.find(name)?.cgroup) throw new Error('the started container\'s cgroup was not found: its huge page limits cannot be applied');
        await this.update(inst, hugepages);
      } catch (err) {
        await this.killLeftover(name);
        throw err;
      }
    }
    const keys = LxcDriver.volatileKeys(plan);
    keys['volatile.idmap.current'] = keys['volatile.idmap.next']!;
    return keys;
  }

  /**
   * The container's root (a mapped, unprivileged id) must be able to pass through every directory
   * above its rootfs. Directories of the daemon's data dir get search permission for others (not
   * read: nothing becomes listable), as the reference's data dir has; others are the admin's.
   */
  private async traversable(rootfs: string, instanceDir: string): Promise<void> {
    const top = path.resolve(this.opts.dataDir);
    const inside = (dir: string) => dir === top || dir.startsWith(`${top}${path.sep}`);
    for (let dir = path.dirname(path.resolve(rootfs)); inside(dir); dir = path.dirname(dir)) {
      // The instance directory is the container root's own (instance-dir.ts).
      if (dir === path.resolve(instanceDir)) continue;
      if (this.searchable.has(dir)) break;
      const st = await stat(dir);
      if ((st.mode & 0o001) === 0) await chmod(dir, (st.mode & 0o7777) | 0o001);
      this.searchable.add(dir);
      if (dir === top) break;
    }
  }

  /** After a failed start nothing may keep running: kill whatever the attempt left. */
  private async killLeftover(name: string): Promise<void> {
    this.monitors.forget(name);
    if (this.monitors.find(name)) {
      await runTool(this.opts.hostTools, 'lxc-stop', ['-n', name, '-P', this.paths.lxcpath, '-k'], STOP_GRACE_MS).catch(() => undefined);
    }
    this.monitors.forget(name);
    await rm(this.paths.pidFile(name), { force: true });
    await this.reapMonitor(name);
  }

  /** A failed start's monitor may still be winding down after its pid file went: wait briefly, then kill it. */
  private async reapMonitor(name: string): Promise<void> {
    const deadline = Date.now() + MONITOR_EXIT_MS;
    for (let pids = monitorProcesses(this.paths.lxcpath, name); pids.length > 0; pids = monitorProcesses(this.paths.lxcpath, name)) {
      if (Date.now() > deadline) {
        for (const pid of pids) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch { /* already gone */ }
        }
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** A 400 when liblxc refused the config (only raw.lxc can make it do so), a 500 otherwise. */
  private async startFailure(stderr: string, logFile: string, offset: number, hasRawLxc: boolean): Promise<ApiError> {
    // liblxc prefixes each message with its tool, container, source file and line: keep the message.
    const fromTool = stderr.split('\n')
      .map((l) => l.trim().replace(/^lxc-\w+: [^:]+: \S+: \w+: \d+ /, ''))
      .filter((l) => l && !/To get more details|Additional information can be obtained|The container failed to start/.test(l));
    const fromLog = (await readFrom(logFile, offset)).split('\n')
      .filter((l) => / ERROR /.test(l))
      .map((l) => l.replace(/^.*? ERROR\s+/, '').replace(/^\w+ - \S+ - /, ''));
    const detail = [...fromTool, ...fromLog].slice(-6).join('; ') || 'the container did not reach the running state';
    const configRefused = /Failed to (parse|load) config/.test(stderr);
    const hint = hasRawLxc && !configRefused ? ' (check raw.lxc)' : '';
    return new ApiError(configRefused ? 400 : 500, `Failed to start the instance${hint}: ${detail}`);
  }

  async stop(inst: DriverInstance, opts: { force: boolean; timeoutMs: number }): Promise<void> {
    const name = this.nameOf(inst);
    const running = this.monitors.find(name);
    if (!running) return;
    await this.returnHotpluggedPhys(name, running.initPid);
    const kill = opts.force || opts.timeoutMs <= 0;
    // A frozen init cannot act on the halt signal.
    if (!kill && running.cgroup?.frozen()) await this.unfreeze(inst);
    const args = ['-n', name, '-P', this.paths.lxcpath, ...(kill ? ['-k'] : ['-t', String(Math.max(1, Math.ceil(opts.timeoutMs / 1000)))])];
    const stopping = runTool(this.opts.hostTools, 'lxc-stop', args, (kill ? 0 : opts.timeoutMs) + STOP_GRACE_MS);
    if (!kill && running.initPid !== undefined) this.repeatHalt(name, running.initPid, stopping);
    const result = await stopping.catch((err: Error) => ({ exitCode: -1, stderr: err.message }));
    if (await this.stillRunning(name, result.exitCode === 0 ? MONITOR_EXIT_MS : 0)) {
      throw internalError(`Failed to stop the instance: ${result.stderr.trim() || `lxc-stop exited with ${result.exitCode}`}`);
    }
    await this.removeUnixNodes(name);
  }

  /** A just-started init may not have been ready for liblxc's one halt signal. */
  private repeatHalt(name: string, initPid: number, stopping: Promise<unknown>): void {
    repeatHaltWhileYoung(initPid, () => {
      try {
        return configuredHaltSignal(readFileSync(this.paths.config(name), 'utf8'));
      } catch {
        return configuredHaltSignal(''); // no config: liblxc's default signal
      }
    }, stopping);
  }

  /**
   * liblxc gives back the physical interfaces of its config at stop; those added while running it
   * does not know, and a virtual one would die with the namespace: hand them back first.
   */
  private async returnHotpluggedPhys(name: string, pid: number | undefined): Promise<void> {
    if (pid === undefined) return;
    const recorded = readList<RecordedNic>(this.paths.nicsFile(name));
    const phys = recorded.filter((r) => r.hotplugged && r.nic.kind === 'phys');
    for (const r of phys) {
      await this.plumber.remove(pid, r.nic).catch((err) => this.opts.log.warn({ err, container: name, device: r.device }, 'returning a physical interface failed'));
    }
    if (phys.length) await writeList(this.paths.nicsFile(name), recorded.filter((r) => !phys.includes(r)));
  }

  async initPid(inst: DriverInstance): Promise<number | undefined> {
    return this.monitors.find(this.nameOf(inst))?.initPid;
  }

  /** Hot-plug: NICs are made and moved in, disk mounts attached inside; the root filesystem stays. */
  async attachDevice(inst: DriverInstance, run: DeviceRunConfig): Promise<void> {
    const name = this.nameOf(inst);
    // A root disk edit (its size) keeps the root filesystem in use; another one cannot replace it.
    if (run.rootfs && path.resolve(run.rootfs.path) !== path.resolve(inst.volumePath, 'rootfs')) {
      throw badRequest(`Device "${run.device}" cannot be added to a running container`);
    }
    if (run.mounts?.length) await this.attachMounts(inst, run);
    if (run.unixNodes?.length) await this.attachUnixNodes(inst, run);
    if (!run.nics?.length) return;
    const pid = this.runningInit(inst);
    const recorded = readList<RecordedNic>(this.paths.nicsFile(name));
    const taken = new Set(recorded.map((r) => r.nic.name));
    for (const nic of run.nics) {
      if (taken.has(nic.name)) throw badRequest(`The container already has an interface named "${nic.name}"`);
    }
    const added: RecordedNic[] = [];
    try {
      for (const nic of run.nics) {
        await this.plumber.attach(pid, nic);
        added.push({ device: run.device ?? '', nic, hotplugged: true });
      }
    } catch (err) {
      for (const r of added.reverse()) await this.plumber.remove(pid, r.nic).catch(() => undefined);
      throw err;
    }
    await writeList(this.paths.nicsFile(name), [...recorded, ...added]);
  }

  async detachDevice(inst: DriverInstance, device: string): Promise<void> {
    const name = this.nameOf(inst);
    await this.detachMounts(inst, device);
    await this.detachUnixNodes(inst, device);
    const recorded = readList<RecordedNic>(this.paths.nicsFile(name));
    const mine = recorded.filter((r) => r.device === device);
    if (!mine.length) return;
    const pid = this.runningInit(inst);
    for (const r of mine) await this.plumber.remove(pid, r.nic);
    await writeList(this.paths.nicsFile(name), recorded.filter((r) => r.device !== device));
  }

  /** A disk device's mounts on a running container, recorded for detach; undone together on failure. */
  private async attachMounts(inst: DriverInstance, run: DeviceRunConfig): Promise<void> {
    const pid = this.runningInit(inst);
    const file = this.paths.mountsFile(this.nameOf(inst));
    const recorded = readList<RecordedMount>(file);
    const done: RecordedMount[] = [];
    try {
      for (const m of run.mounts ?? []) {
        if (m.optional && !existsSync(m.source)) continue;
        await this.injector.attach(pid, m);
        done.push({ device: run.device ?? '', target: m.target });
      }
      await writeList(file, [...recorded, ...done]);
    } catch (err) {
      for (const r of done.reverse()) await this.injector.detach(pid, r.target).catch(() => undefined);
      throw err;
    }
  }

  /** Where the container's device nodes are made on the host. */
  private unixNodesDir(name: string): string {
    return path.join(this.unixNodesRoot, name);
  }

  /** The device nodes of a start, made and recorded; none left behind when one fails. */
  private async makeUnixNodes(name: string, devices: DeviceRunConfig[], plan: IdmapPlan): Promise<RecordedUnixNode[]> {
    let made: RecordedUnixNode[];
    try {
      const wanted = devices.flatMap((d) => (d.unixNodes ?? []).map((node) => ({ device: d.device ?? '', node })));
      made = await this.nodeMaker.make(this.unixNodesDir(name), wanted, plan.map);
    } catch (err) {
      await this.removeUnixNodes(name);
      throw err;
    }
    await writeList<RecordedUnixNode>(this.paths.unixNodesFile(name), made);
    return made;
  }

  /** After a stop or a failed start: the nodes on the host go (mounts and rules went with the container). */
  private async removeUnixNodes(name: string): Promise<void> {
    await Promise.all([
      rm(this.unixNodesDir(name), { recursive: true, force: true }),
      writeList<RecordedUnixNode>(this.paths.unixNodesFile(name), []).catch(() => undefined),
    ]);
  }

  /**
   * Hot-plug of device nodes: made on the host, allowed in the cgroup, bind-mounted (all mounts in
   * one helper run); undone together on failure. `kept` are the device's nodes that stay.
   */
  private async attachUnixNodes(inst: DriverInstance, run: DeviceRunConfig, nodes: UnixNode[] = run.unixNodes ?? []): Promise<void> {
    const name = this.nameOf(inst);
    const pid = this.runningInit(inst);
    const cgroup = this.monitors.find(name)?.cgroup;
    const map = parseIdmapJson(inst.config['volatile.idmap.current']) ?? [];
    const file = this.paths.unixNodesFile(name);
    const recorded = readList<RecordedUnixNode>(file);
    checkRuleWritable(cgroup);
    const made = (await this.nodeMaker.make(this.unixNodesDir(name), nodes.map((node) => ({ device: run.device ?? '', node })), map))
      .map((r) => ({ ...r, hotplugged: true }));
    let mounted = 0;
    try {
      for (const r of made) writeCgroupRule(cgroup, cgroupRule(r.node), true);
      await this.injector.batch(pid, made.map((r) => ({ attach: bindMount(r) }))).catch((err: unknown) => {
        if (err instanceof InjectionFailure) mounted = err.done;
        throw err;
      });
      mounted = made.length;
      await writeList(file, [...recorded, ...made]);
    } catch (err) {
      await this.undoUnixNodes(inst, made, recorded, mounted).catch(() => undefined);
      throw err instanceof InjectionFailure ? internalError(err.message) : err;
    }
  }

  private async detachUnixNodes(inst: DriverInstance, device: string): Promise<void> {
    const file = this.paths.unixNodesFile(this.nameOf(inst));
    const recorded = readList<RecordedUnixNode>(file);
    const mine = recorded.filter((r) => r.device === device);
    if (!mine.length) return;
    const others = recorded.filter((r) => r.device !== device);
    await this.undoUnixNodes(inst, mine, others);
    await writeList(file, others);
  }

  /**
   * A device that follows the host gets its new set of nodes: the ones gone are taken out, the new
   * ones put in, the others left mounted (a process using one keeps it). Other kinds of run
   * config are detached and attached whole.
   */
  async updateDevice(inst: DriverInstance, run: DeviceRunConfig): Promise<void> {
    const device = run.device ?? '';
    if (run.rootfs || run.mounts?.length || run.nics?.length) {
      await this.detachDevice(inst, device);
      await this.attachDevice(inst, run);
      return;
    }
    const file = this.paths.unixNodesFile(this.nameOf(inst));
    const recorded = readList<RecordedUnixNode>(file);
    const key = (n: UnixNode) => JSON.stringify([n.kind, n.major, n.minor, n.path, n.uid, n.gid, n.mode]);
    const wanted = new Set((run.unixNodes ?? []).map(key));
    const gone = recorded.filter((r) => r.device === device && !wanted.has(key(r.node)));
    const staying = recorded.filter((r) => !gone.includes(r));
    if (gone.length) {
      await this.undoUnixNodes(inst, gone, staying);
      await writeList(file, staying);
    }
    const have = new Set(staying.filter((r) => r.device === device).map((r) => key(r.node)));
    const added = (run.unixNodes ?? []).filter((n) => !have.has(key(n)));
    if (added.length) await this.attachUnixNodes(inst, run, added);
  }

  /**
   * Nodes out of a running container: unmounted and their places removed inside (the first
   * `mounted` of them; all by default), their cgroup rules denied unless the base config or a
   * node in `others` still needs them, the host nodes removed.
   */
  private async undoUnixNodes(inst: DriverInstance, nodes: RecordedUnixNode[], others: RecordedUnixNode[], mounted = nodes.length): Promise<void> {
    try {
      const pid = this.runningInit(inst);
      await this.injector.batch(pid, nodes.slice(0, mounted).reverse().map((r) => ({ detach: r.node.path, remove: true })))
        .catch((err: unknown) => {
          throw err instanceof InjectionFailure ? internalError(err.message) : err;
        });
      const keep = new Set([...ALLOWED_DEVICES, ...others.map((o) => cgroupRule(o.node))]);
      const cgroup = this.monitors.find(this.nameOf(inst))?.cgroup;
      for (const rule of new Set(nodes.map((r) => cgroupRule(r.node)))) if (!keep.has(rule)) writeCgroupRule(cgroup, rule, false);
    } finally {
      // The host nodes go whatever happened inside: nothing may keep them for the container.
      for (const r of nodes) await this.nodeMaker.remove(r);
    }
  }

  private async detachMounts(inst: DriverInstance, device: string): Promise<void> {
    const file = this.paths.mountsFile(this.nameOf(inst));
    const recorded = readList<RecordedMount>(file);
    const mine = recorded.filter((r) => r.device === device);
    if (!mine.length) return;
    const pid = this.runningInit(inst);
    // Nested mounts first.
    for (const r of [...mine].reverse()) await this.injector.detach(pid, r.target);
    await writeList(file, recorded.filter((r) => r.device !== device));
  }

  /** lxc-stop may report success a moment before the liblxc monitor has exited: give it `graceMs`. */
  private async stillRunning(name: string, graceMs: number): Promise<boolean> {
    const deadline = Date.now() + graceMs;
    for (;;) {
      this.monitors.forget(name);
      if (!this.monitors.find(name)) return false;
      if (Date.now() >= deadline) return true;
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  private async freezer(inst: DriverInstance, tool: 'lxc-freeze' | 'lxc-unfreeze', wantFrozen: boolean): Promise<void> {
    const name = this.nameOf(inst);
    const running = this.monitors.find(name);
    if (!running) throw badRequest('The instance is not running');
    const result = await runTool(this.opts.hostTools, tool, ['-n', name, '-P', this.paths.lxcpath], STOP_GRACE_MS);
    if (result.exitCode !== 0 || running.cgroup?.frozen() !== wantFrozen) {
      throw internalError(`Failed to ${wantFrozen ? 'freeze' : 'unfreeze'} the instance: ${result.stderr.trim() || `${tool} exited with ${result.exitCode}`}`);
    }
  }

  freeze(inst: DriverInstance): Promise<void> {
    return this.freezer(inst, 'lxc-freeze', true);
  }

  unfreeze(inst: DriverInstance): Promise<void> {
    return this.freezer(inst, 'lxc-unfreeze', false);
  }

  async status(inst: DriverInstance): Promise<InstanceStatus> {
    return this.statusNow(inst);
  }

  statusRevision(): number {
    return this.monitors.revision();
  }

  /** A stat of the monitor's pid file (and, running, a read of its cmdline and freezer state). */
  statusNow(inst: DriverInstance): InstanceStatus {
    const running = this.monitors.find(this.nameOf(inst));
    if (!running) return 'Stopped';
    return running.cgroup?.frozen() ? 'Frozen' : 'Running';
  }

  async state(inst: DriverInstance): Promise<RuntimeState> {
    const name = this.nameOf(inst);
    const running = this.monitors.find(name);
    if (!running) return stoppedState();
    const recorded = readList<RecordedNic>(this.paths.nicsFile(name));
    // The helper reads the cgroup files and the interfaces beside the event loop (live-state.ts).
    const files = running.cgroup ? (running.stateFiles ??= stateFiles(running.cgroup)) : [];
    const live = running.initPid === undefined ? undefined : await this.live.read(running.initPid, files);
    const cgroup = running.cgroup?.withContents(live?.files);
    // Only /proc's addresses need telling which interface a routed /32 is on; netlink names it.
    const owners = live ? undefined : new Map(recorded.flatMap((r) => (r.nic.ipv4 ?? []).map((a) => [a.split('/')[0]!, r.nic.name] as [string, string])));
    const state = runningState(running, cgroup?.frozen() ? 'Frozen' : 'Running', owners, live?.network, cgroup);
    for (const r of recorded) {
      const iface = state.network?.[r.nic.name];
      if (iface && r.nic.kind === 'veth') iface.host_name = r.nic.hostName ?? '';
    }
    return state;
  }

  async metrics(inst: DriverInstance): Promise<InstanceMetrics | undefined> {
    const running = this.monitors.find(this.nameOf(inst));
    if (!running?.cgroup || running.initPid === undefined) return undefined;
    // As for state: the helper reads the files and counts the interfaces beside the event loop.
    const live = await this.live.read(running.initPid, (running.metricsFiles ??= metricsFiles(running.cgroup)));
    return readMetrics(inst, running.initPid, running.cgroup.withContents(live?.files), this.blockDevices, this.host().totalMemory, live);
  }

  private runningInit(inst: DriverInstance): number {
    const running = this.monitors.find(this.nameOf(inst));
    if (!running) throw badRequest('Instance is not running');
    if (running.initPid === undefined) throw conflict('The instance is still starting');
    if (running.cgroup?.frozen()) throw badRequest('Instance is frozen');
    return running.initPid;
  }

  async exec(inst: DriverInstance, spec: ExecSpec): Promise<ExecSession> {
    const initPid = this.runningInit(inst);
    return startExec(this.opts.hostTools, {
      lxcpath: this.paths.lxcpath, name: this.nameOf(inst), initPid, rootfs: path.join(inst.volumePath, 'rootfs'),
    }, spec);
  }

  async console(inst: DriverInstance, size: { width: number; height: number }): Promise<ConsoleSession> {
    this.runningInit(inst);
    return startConsole(this.opts.hostTools, this.paths.lxcpath, this.nameOf(inst), size);
  }

  consoleLogPath(inst: DriverInstance): string {
    return path.join(inst.logDir, 'console.log');
  }

  /**
   * Limits go straight into the running container's cgroup; a failure puts back the values
   * already changed. Other `security.*` and `raw.*` keys are refused while running, but those read
   * only at a start (NEXT_START_KEYS).
   */
  async update(inst: DriverInstance, changed: Record<string, string | undefined>): Promise<void> {
    const name = this.nameOf(inst);
    const running = this.monitors.find(name);
    if (!running?.cgroup) return;
    const cgroup = running.cgroup;
    for (const key of Object.keys(changed)) {
      if ((key.startsWith('security.') && !NEXT_START_KEYS.has(key)) || key.startsWith('raw.')) {
        throw badRequest(`"${key}" cannot be changed while the instance is running`);
      }
    }
    if (HUGEPAGE_KEYS.some((k) => k in changed)) this.delegateHugetlb();
    const undo: (() => void)[] = [];
    try {
      for (const key of [...LIMIT_KEYS, ...HUGEPAGE_KEYS]) {
        if (!(key in changed)) continue;
        let limit;
        try {
          limit = key.startsWith(HUGEPAGE_PREFIX) ? hugepageLimit(key, changed[key]) : cgroupLimit(key, changed[key], this.host(), name)!;
        } catch (err) {
          throw badRequest(`Invalid value for "${key}": ${(err as Error).message}`);
        }
        const where = cgroup.file(limit.controller, limit.v1, limit.v2);
        if (!where) throw badRequest(`"${key}" cannot be applied: the ${limit.controller} cgroup controller is not available`);
        const previous = readText(where.path)?.trim();
        // A lifted cpuset goes back to what the parent cgroup allows.
        const allCpus = limit.controller === 'cpuset'
          ? readText(cgroup.parentFile('cpuset', 'cpuset.cpus', 'cpuset.cpus.effective') ?? '')?.trim() || formatCpuList(this.host().cpus)
          : '';
        const value = unlimitedValue(limit, where.version, allCpus);
        try {
          cgroup.write(limit.controller, limit.v1, limit.v2, value);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          const why = code === 'EBUSY' ? 'the container uses more than that' : (err as Error).message;
          throw badRequest(`Failed to set "${key}" to "${changed[key] ?? ''}": ${why}`);
        }
        if (previous !== undefined) undo.push(() => cgroup.write(limit.controller, limit.v1, limit.v2, previous));
      }
    } catch (err) {
      for (const step of undo.reverse()) {
        try { step(); } catch (e) { this.opts.log.warn({ err: e, instance: name }, 'restoring a cgroup limit failed'); }
      }
      throw err;
    }
  }

  async remove(inst: DriverInstance): Promise<void> {
    const name = this.nameOf(inst);
    if (this.monitors.find(name)) throw conflict('The instance is running');
    this.monitors.forget(name);
    await rm(this.paths.dir(name), { recursive: true, force: true });
    await rm(this.unixNodesDir(name), { recursive: true, force: true });
  }

  /**
   * The liblxc directory of a container: the lxcpath passable (0711, as the reference's), each
   * container's own directory root's alone (0700): only root's tools read its config and pid file.
   */
  private async containerDir(name: string): Promise<void> {
    await mkdir(this.paths.lxcpath, { recursive: true, mode: LXCPATH_MODE });
    await mkdir(this.paths.dir(name), { recursive: true, mode: CONTAINER_DIR_MODE });
    await setMode(this.paths.lxcpath, LXCPATH_MODE);
    await setMode(this.paths.dir(name), CONTAINER_DIR_MODE);
  }

  /**
   * At boot: containers started by an earlier daemon that intercept syscalls need the proxy again
   * (their monitors reconnect to it at their next notification).
   */
  async resumeInterception(): Promise<void> {
    const names = await readdir(this.paths.lxcpath).catch(() => [] as string[]);
    // The config first: one read, where telling whether the container runs is several.
    const needed = names.some((name) => {
      try {
        if (!readFileSync(this.paths.config(name), 'utf8').includes('\nlxc.seccomp.notify.proxy = ')) return false;
      } catch {
        return false;
      }
      return this.monitors.find(name) !== undefined;
    });
    if (needed) await this.interceptor.ensure();
  }

  /** Directories no record owns (a crash between steps): removed, unless their container runs. */
  async cleanup(known: { project: string; name: string }[]): Promise<void> {
    const owned = new Set(known.map((k) => lxcName(k.project, k.name)));
    const entries = await readdir(this.paths.lxcpath).catch(() => [] as string[]);
    if (entries.length) await setMode(this.paths.lxcpath, LXCPATH_MODE);
    for (const name of entries) {
      if (owned.has(name)) {
        // Made by an older version with the default mode.
        await setMode(this.paths.dir(name), CONTAINER_DIR_MODE);
        continue;
      }
      if (this.monitors.find(name)) {
        this.opts.log.warn({ container: name, lxcpath: this.paths.lxcpath }, 'a container without an instance record is running: left alone');
        continue;
      }
      this.opts.log.warn({ container: name }, 'removing a container directory that has no instance record (left by a crash)');
      await rm(this.paths.dir(name), { recursive: true, force: true });
    }
    // Device nodes of containers not running (one that shut down from inside keeps them until here).
    const withNodes = await readdir(this.unixNodesRoot).catch(() => [] as string[]);
    for (const name of withNodes) {
      if (!this.monitors.find(name)) await this.removeUnixNodes(name);
    }
  }
}

const LXCPATH_MODE = 0o711;
const CONTAINER_DIR_MODE = 0o700;

async function setMode(dir: string, mode: number): Promise<void> {
  const st = statInPlace(dir);
  if (st?.isDirectory() && (st.mode & 0o7777) !== mode) await chmod(dir, mode);
}

function fileSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** The part of a log written since `offset` (at most the last 64 KiB of it). */
async function readFrom(file: string, offset: number): Promise<string> {
  const handle = await open(file, 'r').catch(() => undefined);
  if (!handle) return '';
  try {
    const { size } = await handle.stat();
    const start = Math.max(offset, size - 65536);
    if (size <= start) return '';
    const buf = Buffer.alloc(size - start);
    await handle.read(buf, 0, buf.length, start);
    return buf.toString('utf8');
  } finally {
    await handle.close();
  }
}
