/**
 * Which accelerator VMs start with: TCG until the KVM probe (probe.ts) says a kernel boots under
 * KVM. The probe runs in the background once: with the host's own kernel when it has one, else
 * with the first kernel a VM start reads out of its disk. Its verdict is kept in the data
 * directory for later boots on the same host kernel and QEMU, and in /run for every daemon of this
 * host until it reboots: KVM is the host's property, and a probe that hangs costs a core for its
 * whole deadline. `CORRAL_QEMU_ACCEL=tcg` skips it.
 */
import path from 'node:path';
import type { HostTools } from '../../sdk/index.js';
import type { DriverLog } from './driver.js';
import { hostKernel, probeKvm, storedVerdict, storeVerdict, type AcceleratorVerdict } from './probe.js';

/** The verdict every daemon of this host reads until the host reboots (/run is a tmpfs). */
const HOST_VERDICT = '/run/corral/qemu-accelerator.json';

export class AcceleratorChoice {
  verdict: AcceleratorVerdict = { accelerator: 'tcg', reason: 'the KVM probe has not finished' };
  private probing = false;
  private qemuVersion?: string;

  constructor(private readonly tools: HostTools, private readonly log: DriverLog, private readonly runRoot: string) {}

  private get files(): string[] {
    return [path.join(this.runRoot, 'accelerator.json'), HOST_VERDICT];
  }

  /** At boot, once QEMU answered: a kept verdict, or the probe with the host's kernel. */
  async boot(qemuVersion: string): Promise<void> {
    this.qemuVersion = qemuVersion;
    if (process.env.CORRAL_QEMU_ACCEL === 'tcg') {
      this.verdict = { accelerator: 'tcg', reason: 'CORRAL_QEMU_ACCEL=tcg' };
      this.probing = true;
      return;
    }
    const [own, host] = await Promise.all(this.files.map((file) => storedVerdict(file, qemuVersion)));
    const kept = own ?? host;
    // This data dir keeps what the host already knew, as if it had probed itself.
    if (!own && host) await storeVerdict(this.files[0]!, qemuVersion, host).catch(() => {});
    if (kept) {
      this.verdict = kept;
      this.probing = true;
      return;
    }
    // In the background: a hanging KVM costs the probe's deadline, never the boot.
    void hostKernel().then((kernel) => this.probe(kernel));
  }

  /** Probe with `kernel` unless a probe ran or runs (a VM start offers its kernel). */
  probe(kernel: string | undefined): void {
    if (this.probing || this.qemuVersion === undefined) return;
    this.probing = true;
    void probeKvm(this.tools, kernel).then(async (verdict) => {
      this.verdict = verdict;
      this.log.info({ ...verdict }, 'VM accelerator chosen');
      // Without a kernel to boot, the probe waits for the first VM's.
      if (!kernel && verdict.reason?.startsWith('no kernel')) {
        this.probing = false;
        return;
      }
      for (const file of this.files) await storeVerdict(file, this.qemuVersion!, verdict).catch((err) => this.log.warn({ err, file }, 'the accelerator verdict could not be kept'));
    });
  }
}
