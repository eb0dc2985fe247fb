/**
 * The QEMU instance driver: virtual machines run by qemu-system-x86_64, one generated config per
 * VM, controlled over QMP. QEMU daemonizes, so a VM outlives the daemon; what runs is read back
 * from each VM's run directory (pid file, sockets), never from memory alone. A start is marked in
 * the run directory until it completes, so the boot after a crash mid-start knows to undo it.
 */
import { existsSync } from 'node:fs';
import { appendFile, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import {
  ApiError, badRequest, BLOCK_IMAGE, conflict, internalError, truthy,
  type ConfigKeyDescriptor, type ConsoleSession, type DeviceConfig, type DeviceRunConfig, type DriverInstance, type ExecSession, type ExecSpec,
  type HostTools, type InstanceDriver, type InstanceFiles, type InstanceMetrics, type InstanceStatus, type RuntimeState,
} from '../../sdk/index.js';
import type { AgentConnector, GuestAgent, GuestState } from './agent/contract.js';
import { readBlockStats } from './block-stats.js';
import { MemoryPeaks } from './memory-peak.js';
import { agentFiles } from './agent/instance-files.js';
import { extractBootFiles } from './boot-files.js';
import { commandLine } from './command-line.js';
import { buildConfigDrive, findAgentBinary } from './config-drive.js';
import { consoleSession } from './console-session.js';
import { connectSpice } from './vga.js';
import { firmwareFor } from './firmware.js';
import { memoryMiB, QEMU_KEYS, vcpus } from './limits.js';
import { readVmMetrics } from './metrics.js';
import { QEMU, type Accelerator } from './probe.js';
import { applyOverrides, parseOverrides, renderSections } from './qemu-config.js';
import { checkRawQemu } from './raw-qemu.js';
import { RunDir, runRoot, volumeName } from './run-dir.js';
import { runningState, stoppedState } from './runtime-state.js';
import { isQemuOf, livePid, VmTable } from './supervision.js';
import { TapPlumber, tapFor, tapNetdev, readTaps, writeTaps, type Tap } from './taps.js';
import { helperCommand } from './macvtap.js';
import { bootIndexes, HOTPLUG_PORTS, hotplugPort, vmSections, type BootDevice } from './vm-sections.js';
import { mountsUnder, plugShare, readHotShares, releaseHotShares, spareShareSections, unplugShare } from './vm-share-hotplug.js';
import { attachedDisk, checkNotInUse, diskSections, driveId, freeSparePort, plugDisk, readDisks, unplugDisk, writeDisks, type AttachedDisk } from './vm-disks.js';
import { startTpm, stopTpm, tpmDeviceOf, tpmSections, tpmStateDir } from './vm-tpm.js';
import { sharedAtStart, shareSections, sharesOf, writeMountList, type Share } from './vm-shares.js';
import { withTimeout } from './qmp.js';
import { refusedDevice } from './vm-devices.js';
import { growRootDisk, rootDiskSize } from './root-disk.js';

/** The logger methods the driver uses (a bunyan logger in the daemon). */
export interface DriverLog {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface QemuDriverOptions {
  hostTools: HostTools;
  log: DriverLog;
  dataDir: string;
  /** The accelerator VMs start with now (the probe may still be running: TCG until it says KVM). */
  accelerator: () => { accelerator: Accelerator; reason?: string };
  /** Told each kernel a start extracts (the KVM probe may boot it). */
  kernelSeen?: (kernel: string) => void;
  /** Why VMs cannot start on this host (QEMU missing or broken), once the boot probe has run. */
  unavailable?: () => string | undefined;
  /** The guest agent's host side, when this build has it (loaded after register: asked each time). */
  agent?: () => AgentConnector | undefined;
}

const SPAWN_TIMEOUT_MS = 30_000;
/** How long a guest may take to let go of an unplugged card. */
const UNPLUG_TIMEOUT_MS = 15_000;
const QMP_TIMEOUT_MS = 10_000;
/** A metrics scrape covers every VM: the agent's figures and QEMU's block counters are skipped past this. */
const METRICS_QMP_TIMEOUT_MS = 1_000;
/** After `quit` or SIGTERM, how long QEMU may take to exit before SIGKILL. */
const KILL_GRACE_MS = 2_000;

export class QemuDriver implements InstanceDriver {
  readonly type = 'virtual-machine' as const;
  readonly name = 'qemu';
  readonly configKeys: ConfigKeyDescriptor[] = QEMU_KEYS;
  private readonly vms = new VmTable((run, e) => {
    // What the guest or QEMU did on its own (a guest poweroff, a reset, a pause) shows in the daemon log.
    if (e.event === 'SHUTDOWN' || e.event === 'POWERDOWN' || e.event === 'RESET' || e.event === 'GUEST_PANICKED') {
      this.opts.log.info({ vm: run.key, event: e.event, data: e.data }, 'VM event');
    }
  });
  private readonly taps: TapPlumber;
  private readonly agents = new Map<string, GuestAgent>();
  private readonly memoryPeaks = new MemoryPeaks();

  constructor(private readonly opts: QemuDriverOptions) {
    this.taps = new TapPlumber(opts.hostTools);
  }

  runDir(inst: { project: string; name: string }): RunDir {
    return new RunDir(runRoot(this.opts.dataDir), volumeName(inst.project, inst.name));
  }

  /** What the key registry cannot judge alone: values as a VM reads them, raw.qemu by QEMU itself. */
  async validate(config: Record<string, string>): Promise<void> {
    this.checkConfig(config);
    if (config['raw.qemu']) await checkRawQemu(this.opts.hostTools, config['raw.qemu']);
  }

  private checkConfig(config: Record<string, string>): void {
    const check = (key: string, fn: (v: string) => void) => {
      const v = config[key];
      if (v === undefined || v === '') return;
      try {
        fn(v);
      } catch (err) {
        throw badRequest(`Invalid value for "${key}": ${(err as Error).message}`);
      }
    };
    check('limits.cpu', (v) => void vcpus(v));
    check('limits.memory', (v) => void memoryMiB(v));
    check('raw.qemu.conf', (v) => void parseOverrides(v));
    if (truthy(config['security.csm']) && truthy(config['security.secureboot'] ?? 'false')) {
      throw badRequest('"security.csm" (legacy BIOS) cannot be combined with "security.secureboot"');
    }
  }

  /** Devices a VM cannot take are refused when the instance is created or edited. */
  validateDevices(devices: Record<string, DeviceConfig>): void {
    for (const [name, config] of Object.entries(devices)) {
      const why = refusedDevice(config);
      if (why) throw badRequest(`Invalid device "${name}": ${why}`);
    }
    tpmDeviceOf(devices);
  }

  /** A new VM's root disk grows to its device's size (a failure here removes the new volume). */
  async initialize(inst: DriverInstance): Promise<Record<string, string>> {
    await growRootDisk(inst.volumePath, rootDiskSize(inst.devices));
    return {};
  }

  async start(inst: DriverInstance, devices: DeviceRunConfig[]): Promise<Record<string, string>> {
    const run = this.runDir(inst);
    if (this.vms.find(run)) throw badRequest('The instance is already running');
    const unavailable = this.opts.unavailable?.();
    if (unavailable) throw badRequest(`Virtual machines cannot start on this host: ${unavailable}`);
    this.checkConfig(inst.config);
    this.validateDevices(inst.devices);
    const rawArgs = inst.config['raw.qemu'] ? await checkRawQemu(this.opts.hostTools, inst.config['raw.qemu']) : [];
    const disk = path.join(inst.volumePath, BLOCK_IMAGE);
    if (!existsSync(disk)) throw badRequest(`The instance has no root disk image (${BLOCK_IMAGE}): it was not made from a virtual-machine image`);
    const disks: AttachedDisk[] = devices.flatMap((d) => (d.blocks ?? []).map((b) => attachedDisk(d.device ?? '', b)));
    const shares: Share[] = devices.flatMap((d) => sharesOf(d.device ?? '', d.mounts ?? []));
    checkNotInUse(runRoot(this.opts.dataDir), run, disks);
    const tpm = tpmDeviceOf(inst.devices);

    await mkdir(run.dir, { recursive: true, mode: 0o700 });
    await writeFile(run.startingMarker, String(process.pid));
    const taps: Tap[] = [];
    const log = path.join(inst.logDir, 'qemu.log');
    try {
      await this.removeStale(run);
      // A guest that powered itself off leaves its taps (they outlive QEMU): the new start makes them afresh.
      await this.stopped(run);
      const boot = await extractBootFiles(this.opts.hostTools, disk, run.kernel, run.initrd, run.bootSignature);
      if (boot) this.opts.kernelSeen?.(boot.kernel);
      const firmware = boot ? undefined : await firmwareFor(inst.config, inst.volumePath);
      await buildConfigDrive(run.configDrive, inst, findAgentBinary());
      await writeMountList(run.configDrive, shares);
      const bootOrder: BootDevice[] = [{ id: 'root', priority: Number(inst.devices[rootDeviceName(inst.devices)]?.['boot.priority'] ?? 0) }];
      for (const d of devices) {
        for (const nic of d.nics ?? []) {
          const tap = tapFor(d.device ?? nic.name, nic);
          await this.taps.create(tap);
          taps.push(tap);
          if (tap.macvtap) tap.helper = await helperCommand(run.dir, tap.name);
          bootOrder.push({ id: `nic-${tap.device}`, priority: Number(inst.devices[tap.device]?.['boot.priority'] ?? 0) });
        }
      }
      for (const disk of disks) bootOrder.push({ id: driveId(disk.device), priority: Number(inst.devices[disk.device]?.['boot.priority'] ?? 0) });
      await writeTaps(run.tapsFile, taps);
      const accel = this.opts.accelerator();
      const sections = vmSections({
        run, disk, accelerator: accel.accelerator, cpus: vcpus(inst.config['limits.cpu']), memoryMiB: memoryMiB(inst.config['limits.memory']),
        taps, bootOrder, firmware, directKernel: Boolean(boot), consoleLog: this.consoleLogPath(inst),
      });
      const indexes = bootIndexes(bootOrder);
      sections.push(...diskSections(disks, (id) => indexes.get(id)), ...shareSections(shares), ...spareShareSections(run), ...(tpm ? tpmSections(run) : []));
      await writeDisks(run, disks);
      await mkdir(inst.logDir, { recursive: true });
      if (tpm) await startTpm(this.opts.hostTools, run, tpmStateDir(inst.volumePath), path.join(inst.logDir, 'swtpm.log'));
      let config;
      try {
        config = renderSections(applyOverrides(sections, parseOverrides(inst.config['raw.qemu.conf'] ?? '')));
      } catch (err) {
        throw badRequest(`Invalid value for "raw.qemu.conf": ${(err as Error).message}`);
      }
      await writeFile(run.configFile, config);
      const args = commandLine({ run, name: inst.name, accelerator: accel.accelerator, uuid: inst.config['volatile.uuid'], boot, rawArgs });
      await mkdir(inst.logDir, { recursive: true });
      await appendFile(log, `${new Date().toISOString()} starting: accelerator ${accel.accelerator}${accel.reason ? ` (${accel.reason})` : ''}, ${boot ? 'direct kernel boot' : `firmware boot (${firmware?.name ?? 'SeaBIOS'})`}\n`);
      const started = Date.now();
      const r = await this.opts.hostTools.run(QEMU, args, { timeoutMs: SPAWN_TIMEOUT_MS, allowFailure: true });
      if (r.exitCode !== 0) {
        const why = r.stderr.split('\n').map((l) => l.replace(/^qemu-system-\w+: /, '').trim()).filter(Boolean).slice(-3).join('; ');
        await appendFile(log, `QEMU failed to start: ${why}\n`);
        // Only what the user gave QEMU can make it refuse its command line.
        const userMade = rawArgs.length > 0 || Boolean(inst.config['raw.qemu.conf']);
        throw new ApiError(userMade ? 400 : 500, `Failed to start the virtual machine${userMade ? ' (check raw.qemu and raw.qemu.conf)' : ''}: ${why || `QEMU exited with ${r.exitCode}`}`);
      }
      const qmp = await this.vms.qmp(run);
      await qmp.execute('cont', undefined, QMP_TIMEOUT_MS);
      await writeFile(run.acceleratorFile, accel.accelerator);
      await rm(run.startingMarker, { force: true });
      await appendFile(log, `${new Date().toISOString()} running: pid ${this.vms.find(run)?.pid ?? '?'}, spawned in ${Date.now() - started} ms\n`);
      this.memoryPeaks.forget(run.key);
      this.connectAgent(run);
      return {};
    } catch (err) {
      await this.kill(run);
      for (const tap of taps) await this.taps.remove(tap);
      await rm(run.tapsFile, { force: true });
      await stopTpm(run);
      await rm(run.startingMarker, { force: true });
      throw err instanceof ApiError ? err : internalError(`Failed to start the virtual machine: ${(err as Error).message}`);
    }
  }

  private connectAgent(run: RunDir): void {
    const connect = this.opts.agent?.();
    if (!connect) return;
    this.agents.get(run.dir)?.close();
    this.agents.set(run.dir, connect(run.agentSocket));
  }

  private agentOf(inst: DriverInstance): GuestAgent | undefined {
    const run = this.runDir(inst);
    if (!this.vms.find(run)) return undefined;
    // A VM adopted after a daemon restart: its agent is reconnected on first use.
    if (!this.agents.has(run.dir)) this.connectAgent(run);
    return this.agents.get(run.dir);
  }

  private dropAgent(run: RunDir): void {
    this.agents.get(run.dir)?.close();
    this.agents.delete(run.dir);
  }

  /** Sockets and a pid file a dead QEMU left. */
  private async removeStale(run: RunDir): Promise<void> {
    await Promise.all([run.qmpSocket, run.agentSocket, run.consoleSocket, run.spiceSocket, run.pidFile].map((f) => rm(f, { force: true })));
  }

  /** Ends QEMU at once (QMP quit, then SIGKILL), whatever state it is in. */
  private async kill(run: RunDir): Promise<void> {
    const vm = this.vms.find(run);
    if (vm) {
      await (async () => (await this.vms.qmp(run)).execute('quit', undefined, 1_000))().catch(() => undefined);
      if (!(await waitGone(vm.pid, run, KILL_GRACE_MS))) {
        try { process.kill(vm.pid, 'SIGKILL'); } catch { /* gone */ }
        await waitGone(vm.pid, run, KILL_GRACE_MS);
      }
    }
    this.vms.drop(run);
    this.dropAgent(run);
    await this.removeStale(run);
  }

  async stop(inst: DriverInstance, opts: { force: boolean; timeoutMs: number }): Promise<void> {
    const run = this.runDir(inst);
    const vm = this.vms.find(run);
    if (vm) {
      const force = opts.force || opts.timeoutMs <= 0;
      if (!force) {
        const deadline = Date.now() + opts.timeoutMs;
        try {
          const qmp = await this.vms.qmp(run);
          // A paused guest cannot see the power button.
          if (vm.state === 'paused') await qmp.execute('cont', undefined, QMP_TIMEOUT_MS);
          await qmp.execute('system_powerdown', undefined, QMP_TIMEOUT_MS);
        } catch (err) {
          this.opts.log.warn({ err, instance: inst.name }, 'ACPI power-down could not be sent: the VM is killed');
        }
        await waitGone(vm.pid, run, Math.max(0, deadline - Date.now()));
      }
      await this.kill(run);
      if (livePid(run) !== undefined) throw internalError('Failed to stop the virtual machine: QEMU is still running');
    }
    await this.stopped(run);
  }

  /** What a VM holds only while it runs: its taps. */
  private async stopped(run: RunDir): Promise<void> {
    for (const tap of readTaps(run.tapsFile)) await this.taps.remove(tap);
    await rm(run.tapsFile, { force: true });
    await writeDisks(run, []).catch(() => undefined);
    await stopTpm(run);
    await releaseHotShares(this.opts.hostTools, run);
  }

  private async pausing(inst: DriverInstance, command: 'stop' | 'cont', want: 'paused' | 'running'): Promise<void> {
    const run = this.runDir(inst);
    const vm = this.vms.find(run);
    if (!vm) throw badRequest('The instance is not running');
    const qmp = await this.vms.qmp(run);
    await qmp.execute(command, undefined, QMP_TIMEOUT_MS);
    const status = await qmp.execute<{ running: boolean }>('query-status', undefined, QMP_TIMEOUT_MS);
    this.vms.setState(vm, status.running ? 'running' : 'paused');
    if (vm.state !== want) throw internalError(`Failed to ${command === 'stop' ? 'pause' : 'resume'} the virtual machine`);
  }

  freeze(inst: DriverInstance): Promise<void> {
    return this.pausing(inst, 'stop', 'paused');
  }

  unfreeze(inst: DriverInstance): Promise<void> {
    return this.pausing(inst, 'cont', 'running');
  }

  statusRevision(): number {
    return this.vms.revision();
  }

  async status(inst: DriverInstance): Promise<InstanceStatus> {
    const run = this.runDir(inst);
    const vm = this.vms.find(run);
    if (!vm) return 'Stopped';
    // A start under way holds the guest paused until it is ready: that is not a pause.
    if (existsSync(run.startingMarker)) return 'Running';
    if (vm.state === undefined) {
      // Adopted and not asked yet: the answer comes with the QMP link, opened in the background.
      void this.vms.qmp(run).catch((err) => this.opts.log.debug({ err, instance: inst.name }, 'QMP not reachable'));
      return 'Running';
    }
    return vm.state === 'paused' ? 'Frozen' : 'Running';
  }

  async state(inst: DriverInstance): Promise<RuntimeState> {
    const run = this.runDir(inst);
    const vm = this.vms.find(run);
    if (!vm) return stoppedState();
    const status = await this.status(inst);
    const guest = await this.guestState(inst, status);
    const peak = guest ? this.memoryPeaks.seen(run.key, guest.memory.usage) : this.memoryPeaks.peak(run.key);
    return runningState(vm.pid, status, readTaps(run.tapsFile), guest, peak);
  }

  /**
   * The agent's report, unless the guest is paused (it would answer nothing), has no agent up, or
   * security.agent.metrics=false asks for the host's figures only.
   */
  private async guestState(inst: DriverInstance, status: InstanceStatus, boundMs?: number): Promise<GuestState | undefined> {
    if (status === 'Frozen' || !truthy(inst.config['security.agent.metrics'] || 'true')) return undefined;
    const agent = this.agentOf(inst);
    if (!agent?.connected) return undefined;
    const asked = agent.state();
    return (boundMs ? withTimeout(asked, boundMs, 'the VM agent\'s state') : asked).catch(() => undefined);
  }

  async metrics(inst: DriverInstance): Promise<InstanceMetrics | undefined> {
    const run = this.runDir(inst);
    const vm = this.vms.find(run);
    if (!vm) return undefined;
    const names = Object.fromEntries(Object.entries(inst.devices).map(([dev, cfg]) => [dev, cfg.name || dev]));
    // A scrape covers every VM: one slow guest must not make it miss Prometheus' timeout.
    const guest = await this.guestState(inst, await this.status(inst), METRICS_QMP_TIMEOUT_MS);
    if (guest) this.memoryPeaks.seen(run.key, guest.memory.usage);
    const disks = await this.vms.qmp(run).then((qmp) => readBlockStats(qmp, METRICS_QMP_TIMEOUT_MS), () => undefined);
    return readVmMetrics(vm.pid, memoryMiB(inst.config['limits.memory']) * 1024 * 1024, readTaps(run.tapsFile), names, guest, disks);
  }

  async exec(inst: DriverInstance, spec: ExecSpec): Promise<ExecSession> {
    const agent = this.requireAgent(inst);
    return agent.exec(spec);
  }

  /** A running VM's files, through its agent (the family's file routes). */
  files(inst: DriverInstance): InstanceFiles {
    return agentFiles(this.requireAgent(inst));
  }

  private requireAgent(inst: DriverInstance): GuestAgent {
    const run = this.runDir(inst);
    const vm = this.vms.find(run);
    if (!vm) throw badRequest('Instance is not running');
    if (vm.state === 'paused') throw badRequest('Instance is frozen');
    const agent = this.agentOf(inst);
    if (!agent?.connected) throw badRequest('VM agent isn\'t currently running');
    return agent;
  }

  async console(inst: DriverInstance): Promise<ConsoleSession> {
    const run = this.runDir(inst);
    if (!this.vms.find(run)) throw badRequest('Instance is not running');
    return consoleSession(run.consoleSocket);
  }

  /** One connection to the VM's SPICE server per channel a viewer opens. */
  async vgaConsole(inst: DriverInstance): Promise<Duplex> {
    const run = this.runDir(inst);
    if (!this.vms.find(run)) throw badRequest('Instance is not running');
    return connectSpice(run.spiceSocket);
  }

  consoleLogPath(inst: DriverInstance): string {
    return path.join(inst.logDir, 'console.log');
  }

  async initPid(inst: DriverInstance): Promise<number | undefined> {
    return this.vms.find(this.runDir(inst))?.pid;
  }

  /** A running VM's config is fixed at start: every change waits for the next start. */
  async update(inst: DriverInstance, changed: Record<string, string | undefined>): Promise<void> {
    if (!this.vms.find(this.runDir(inst))) return;
    for (const key of Object.keys(changed)) {
      if (key === 'security.agent.metrics') continue;
      if (key.startsWith('limits.') || key.startsWith('security.') || key.startsWith('raw.')) {
        throw badRequest(`"${key}" cannot be changed while the virtual machine is running`);
      }
    }
  }

  /**
   * Hot-plug: a NIC becomes a tap, a tap netdev and a virtio-net card on a spare PCIe root port
   * (QMP `netdev_add`, `device_add`); the guest sees a card appear. Nothing else plugs in live.
   */
  async attachDevice(inst: DriverInstance, dev: DeviceRunConfig): Promise<void> {
    const run = this.runDir(inst);
    if (!this.vms.find(run)) throw badRequest('Instance is not running');
    if (dev.blocks?.length && !dev.nics?.length && !dev.mounts?.length) return this.attachDisks(run, dev.device ?? '', dev.blocks.map((b) => attachedDisk(dev.device ?? '', b)));
    if (dev.mounts?.length && !dev.nics?.length && !dev.blocks?.length) {
      const vm = this.vms.find(run)!;
      const qmp = await this.vms.qmp(run);
      const ports = () => freeSparePort([...readDisks(run), ...readHotShares(run)].map((x) => x.port));
      for (const share of sharesOf(dev.device ?? '', dev.mounts)) await plugShare(this.opts.hostTools, run, qmp, vm, this.agentOf(inst), share, ports);
      return;
    }
    if (dev.rootfs || dev.mounts?.length || !dev.nics?.length) throw badRequest(`Device "${dev.device}" cannot be added to a running virtual machine: stop it first`);
    const taps = readTaps(run.tapsFile);
    const used = new Set(taps.map((tp) => tp.port).filter(Boolean));
    const added: Tap[] = [];
    const qmp = await this.vms.qmp(run);
    try {
      for (const nic of dev.nics) {
        const tap = tapFor(dev.device ?? nic.name, nic);
        const port = Array.from({ length: HOTPLUG_PORTS }, (_, n) => hotplugPort(n)).find((p) => !used.has(p));
        if (!port) throw badRequest(`No free slot for device "${tap.device}": a running VM takes ${HOTPLUG_PORTS} hot-plugged NICs at most`);
        await this.taps.create(tap);
        added.push(tap);
        tap.port = port;
        used.add(port);
        if (tap.macvtap) tap.helper = await helperCommand(run.dir, tap.name);
        await qmp.execute('netdev_add', { id: `nic-${tap.device}`, ...tapNetdev(tap) }, QMP_TIMEOUT_MS);
        await qmp.execute('device_add', {
          driver: 'virtio-net-pci', id: `dev-nic-${tap.device}`, netdev: `nic-${tap.device}`, bus: port, ...(tap.hwaddr ? { mac: tap.hwaddr } : {}),
        }, QMP_TIMEOUT_MS);
        await writeTaps(run.tapsFile, [...taps, ...added]);
      }
    } catch (err) {
      for (const tap of added.reverse()) await this.unplugTap(run, tap).catch(() => undefined);
      await writeTaps(run.tapsFile, taps);
      if (err instanceof ApiError) throw err;
      throw badRequest(`Failed to add device "${dev.device}" to the virtual machine: ${(err as Error).message}`);
    }
  }

  /** Disks plug into a running VM one by one; a failure takes out those of this device again. */
  private async attachDisks(run: RunDir, device: string, disks: AttachedDisk[]): Promise<void> {
    checkNotInUse(runRoot(this.opts.dataDir), run, disks);
    const held = readDisks(run);
    const qmp = await this.vms.qmp(run);
    const vm = this.vms.find(run)!;
    const added: AttachedDisk[] = [];
    try {
      for (const disk of disks) {
        await plugDisk(qmp, [...held, ...added, ...readHotShares(run)].map((x) => x.port), disk);
        added.push(disk);
        await writeDisks(run, [...held, ...added]);
      }
    } catch (err) {
      for (const disk of added.reverse()) await unplugDisk(vm, qmp, disk, UNPLUG_TIMEOUT_MS).catch(() => undefined);
      await writeDisks(run, held);
      if (err instanceof ApiError) throw err;
      throw badRequest(`Failed to add device "${device}" to the virtual machine: ${(err as Error).message}`);
    }
  }

  async detachDevice(inst: DriverInstance, device: string): Promise<void> {
    const run = this.runDir(inst);
    const disks = readDisks(run);
    const vm = this.vms.find(run);
    if (vm && sharedAtStart(run.configDrive, device)) throw badRequest(`Device "${device}" cannot be removed from a running virtual machine: stop it first`);
    const hot = readHotShares(run).filter((sh) => sh.device === device);
    if (vm && hot.length) {
      const qmp = await this.vms.qmp(run);
      for (const share of hot) await unplugShare(this.opts.hostTools, run, qmp, vm, this.agentOf(inst), share);
    }
    if (vm && disks.some((d) => d.device === device)) {
      const qmp = await this.vms.qmp(run);
      for (const disk of disks.filter((d) => d.device === device)) await unplugDisk(vm, qmp, disk, UNPLUG_TIMEOUT_MS);
      await writeDisks(run, disks.filter((d) => d.device !== device));
    }
    const taps = readTaps(run.tapsFile);
    const mine = taps.filter((tp) => tp.device === device);
    if (!mine.length) return;
    for (const tap of mine) await this.unplugTap(run, tap);
    await writeTaps(run.tapsFile, taps.filter((tp) => tp.device !== device));
  }

  /** The card leaves once the guest lets go of it (DEVICE_DELETED), then its netdev and tap. */
  private async unplugTap(run: RunDir, tap: Tap): Promise<void> {
    const vm = this.vms.find(run);
    if (vm) {
      const qmp = await this.vms.qmp(run);
      const id = `dev-nic-${tap.device}`;
      const gone = new Promise<void>((resolve) => {
        const listener = (e: { event: string; data?: Record<string, unknown> }) => {
          if (e.event === 'DEVICE_DELETED' && e.data?.device === id) {
            vm.events.splice(vm.events.indexOf(listener), 1);
            resolve();
          }
        };
        vm.events.push(listener);
      });
      const present = await qmp.execute('device_del', { id }, QMP_TIMEOUT_MS).then(() => true, (err: Error) => {
        if (/not found/i.test(err.message)) return false;
        throw err;
      });
      if (present) await withTimeout(gone, UNPLUG_TIMEOUT_MS, `the guest releasing device "${tap.device}"`).catch((err: Error) => {
        throw internalError(`Failed to remove device "${tap.device}": ${err.message}`);
      });
      await qmp.execute('netdev_del', { id: `nic-${tap.device}` }, QMP_TIMEOUT_MS).catch(() => undefined);
    }
    await this.taps.remove(tap);
  }

  async remove(inst: DriverInstance): Promise<void> {
    const run = this.runDir(inst);
    if (this.vms.find(run)) throw conflict('The instance is running');
    await this.stopped(run);
    // A share's host mount left under it would have its files removed with it.
    if (mountsUnder(run.dir).length) throw internalError(`Failed to remove the VM's run directory: ${mountsUnder(run.dir).join(', ')} still mounted`);
    await rm(run.dir, { recursive: true, force: true });
  }

  /**
   * At boot, before running instances are adopted: a start cut short by a crash (its marker is
   * still there) is undone, QEMU killed; a run directory whose QEMU is gone loses its taps and
   * stale sockets; one that no record owns is removed unless its QEMU still runs.
   */
  async cleanup(known: { project: string; name: string }[]): Promise<void> {
    const root = runRoot(this.opts.dataDir);
    const entries = await readdir(root, { withFileTypes: true }).catch(() => []);
    // Only when there is something to look at: `known` holds every instance, containers among them.
    const owned = new Set(entries.length ? known.map((k) => this.runDir(k).dir) : []);
    for (const entry of entries.filter((e) => e.isDirectory()).map((e) => e.name)) {
      const dir = path.join(root, entry);
      const run = RunDir.found(dir);
      if (existsSync(run.startingMarker)) {
        this.opts.log.warn({ vm: entry }, 'a VM start was cut short (daemon crash): undoing it');
        await this.kill(run);
        await this.stopped(run);
        await rm(run.startingMarker, { force: true });
      } else if (!this.vms.find(run)) {
        await this.stopped(run);
        await this.removeStale(run);
      }
      if (owned.has(dir)) continue;
      if (this.vms.find(run)) {
        this.opts.log.warn({ vm: entry }, 'a VM without an instance record is running: left alone');
        continue;
      }
      if (mountsUnder(dir).length) {
        this.opts.log.warn({ vm: entry, mounts: mountsUnder(dir) }, 'a stale VM run directory still has mounts: left alone');
        continue;
      }
      await rm(dir, { recursive: true, force: true });
    }
  }
}

function rootDeviceName(devices: Record<string, DeviceConfig>): string {
  return Object.entries(devices).find(([, d]) => d.type === 'disk' && d.path === '/' && !d.source)?.[0] ?? 'root';
}

/** Waits up to `ms` for QEMU `pid` of `run` to exit. */
async function waitGone(pid: number, run: RunDir, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (!isQemuOf(pid, run)) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
}

