/**
 * The test VM image: `npm run image:vm` builds it (Debian's kernel fetched once into the shared
 * cache) and imports it as a virtual-machine image; its disk boots under QEMU's TCG with the kernel
 * and initramfs it holds, mounts the config share (the hostname comes from its NoCloud meta-data),
 * serves a shell on the serial console and powers off on the ACPI power button.
 */
import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { lxc } from '../helpers/clients.js';
import { imageCommand } from '../helpers/image-command.js';
import { serialUnless } from '../helpers/needs.js';
import { bootDisk, testVmImage, vmProblem } from '../helpers/vm-image.js';

const serial = serialUnless(vmProblem());
let d: Daemon;

test.before(async () => {
  if (!vmProblem()) d = await startWithPool({ plugins: 'full' });
});

test.after.always(async () => {
  await stopDaemons();
});

/** One QMP command after the handshake; resolves with what QEMU said. */
function qmp(socket: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const conn = net.connect(socket);
    let said = '';
    const timer = setTimeout(() => {
      conn.destroy();
      reject(new Error(`QMP did not answer ${command}: ${said}`));
    }, 10_000);
    conn.on('data', (chunk) => {
      said += chunk.toString();
      if (said.includes('"QMP"') && !said.includes('"return"')) conn.write('{"execute":"qmp_capabilities"}\n');
      else if ((said.match(/"return"/g) ?? []).length === 1 && !said.includes(command)) {
        conn.write(`{"execute":"${command}","id":"${command}"}\n`);
        said += command;
      } else if ((said.match(/"return"/g) ?? []).length >= 2) {
        clearTimeout(timer);
        conn.end();
        resolve(said);
      }
    });
    conn.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

serial('npm run image:vm builds the test VM image and imports it as a virtual-machine image', async (t) => {
  const run = await imageCommand('vm', ['--dir', d.dir], 300_000);
  t.is(run.status, 0, run.stderr);
  t.log(`build and import: ${run.ms} ms (npm included)`);
  for (const step of ['building the VM disk', 'uploading: 100%', 'unpacking on the daemon']) t.true(run.stdout.includes(step), `"${step}" in ${run.stdout}`);
  const fingerprint = run.stdout.match(/done: busybox-vm is ([0-9a-f]{64})/)?.[1];
  t.truthy(fingerprint, run.stdout);
  t.regex(run.stdout, /try: lxc launch busybox-vm v1 --vm/);
  const listed = JSON.parse((await lxc(d.socket, 'image', 'list', '--format', 'json')).stdout) as any[];
  const image = listed.find((i) => i.fingerprint === fingerprint);
  t.is(image?.type, 'virtual-machine');
  t.deepEqual(image?.aliases.map((a: any) => a.name), ['busybox-vm']);
  t.is(image?.properties['requirements.secureboot'], 'false');
});

serial('npm run image:vm refuses arguments it does not take', async (t) => {
  for (const args of [['--release', 'bookworm'], ['--frobnicate'], ['--alias']]) {
    const run = await imageCommand('vm', ['--dir', d.dir, ...args]);
    t.is(run.status, 2, `${args.join(' ')}: ${run.stdout} ${run.stderr}`);
  }
});

serial('the test VM disk boots under TCG to a shell with the config share mounted, and powers off on the ACPI power button', async (t) => {
  const image = await testVmImage();
  const work = mkdtempSync(path.join(tmpdir(), 'corral-vm-boot-'));
  const guest = bootDisk(image.rootfs, work, 'vmcheck');
  try {
    const shell = await guest.waitFor('/ # ', 60_000);
    t.log(`QEMU start to the console's shell: ${shell} ms`);
    guest.write('echo "name=$(hostname)"; ls /run/corral-config/cloud-init; cat /sys/class/virtio-ports/*/name 2>/dev/null; echo done-$((6*7))\n');
    await guest.waitFor('done-42', 20_000);
    t.true(guest.console().includes('name=vmcheck'), guest.console().slice(-1000));
    t.true(guest.console().includes('meta-data'), guest.console().slice(-1000));
    const said = await qmp(guest.qmpSocket, 'system_powerdown');
    t.true(said.includes('POWERDOWN') || said.includes('"return"'), said);
    const code = await Promise.race([guest.exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 30_000))]);
    t.is(code, 0, `QEMU still running 30 s after the power button; console:\n${guest.console().slice(-1500)}`);
  } finally {
    guest.kill();
    await guest.exited;
    rmSync(work, { recursive: true, force: true });
  }
});
