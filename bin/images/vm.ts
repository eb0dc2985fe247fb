/**
 * The test VM image (`corrald image vm`): a split virtual-machine image whose disk is one
 * unpartitioned ext4 file system (no bootloader) holding a busybox system, Debian's kernel as
 * /boot/vmlinux (uncompressed ELF) and a small initramfs as /boot/initrd.img. The qemu driver
 * boots such a disk directly with that kernel (its direct-kernel path), which under TCG takes
 * seconds where firmware would take tens. The initramfs loads the virtio, ext4, 9p and power-button modules, mounts
 * /dev/vda and switches to it; busybox init then mounts the daemon's config share (9p tag
 * `config`), keeps the guest agent it finds there running, serves a shell on ttyS0 (the console),
 * takes eth0 up by DHCP and powers off when the ACPI power button is pressed.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BUSYBOX, writeBusyboxRootfs } from './busybox.js';
import { metadataYaml } from './metadata.js';
import type { VmKernel } from './vm-kernel.js';

/** Where the guest mounts the config share and keeps the agent it copied from it. */
const CONFIG_MOUNT = '/run/corral-config';

// The initramfs: modules first (the disk and the console port need virtio), then the root named
// on the command line (root=, default /dev/vda), waited for at most 10 s; a shell on failure.
const INITRAMFS_INIT = `#!/bin/busybox sh
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /newroot
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules/order); do insmod /modules/$m.ko 2>/dev/null; done
root=/dev/vda
for arg in $(cat /proc/cmdline); do case "$arg" in root=*) root="\${arg#root=}" ;; esac; done
tries=0
while [ ! -b "$root" ] && [ $tries -lt 100 ]; do sleep 0.1; tries=$((tries + 1)); done
if ! mount -t ext4 -o rw "$root" /newroot; then
  echo "initramfs: cannot mount $root; here is a shell"
  exec sh
fi
mount --move /dev /newroot/dev
umount /proc /sys
exec switch_root /newroot /sbin/init
`;

const RCS = `#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mkdir -p /dev/pts /run /tmp
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p ${CONFIG_MOUNT}
mount -t 9p -o trans=virtio,version=9p2000.L,ro config ${CONFIG_MOUNT} 2>/dev/null
# The daemon's shares (host directories, filesystem volumes): one "tag path ro|rw" a line.
if [ -f ${CONFIG_MOUNT}/mounts ]; then
  while read -r tag target mode; do
    [ -n "$tag" ] || continue
    mkdir -p "$target"
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,$mode "$tag" "$target" || echo "rcS: cannot mount share $tag at $target"
  done < ${CONFIG_MOUNT}/mounts
fi
name=$(sed -n 's/^local-hostname: *//p' ${CONFIG_MOUNT}/cloud-init/meta-data 2>/dev/null)
[ -n "$name" ] && hostname "$name"
ip link set lo up
# The ACPI power button (system_powerdown) powers the guest off: its first event is enough (an
# evdev read takes whole 24-byte events, so the block is larger than one).
for ev in /sys/class/input/event*; do
  [ "$(cat $ev/device/name 2>/dev/null)" = "Power Button" ] || continue
  ( dd if=/dev/input/\${ev##*/} of=/dev/null bs=64 count=1 2>/dev/null && poweroff ) &
done
if [ -e /sys/class/net/eth0 ]; then
  ip link set eth0 up
  udhcpc -b -S -i eth0 -p /run/udhcpc.eth0.pid -s /usr/share/udhcpc/default.script -x hostname:"$(hostname)"
fi
exit 0
`;

// Respawned by init: run the agent the config share brings (copied out, so the share may change
// under it), or wait and look again when there is none.
const AGENT_RUNNER = `#!/bin/sh
if [ -x ${CONFIG_MOUNT}/agent ]; then
  mkdir -p /run/corral-agent
  cp ${CONFIG_MOUNT}/agent /run/corral-agent/agent
  exec /run/corral-agent/agent
fi
sleep 5
`;

const INITTAB = `::sysinit:/etc/init.d/rcS
::respawn:/etc/init.d/agent
ttyS0::respawn:-/bin/sh
::shutdown:/bin/umount -a -r
`;

/** The initramfs (gzip'd newc cpio) at `out`: busybox, the modules, /init. */
export function writeInitramfs(kernel: VmKernel, work: string, out: string): void {
  const tree = path.join(work, 'initramfs');
  mkdirSync(path.join(tree, 'bin'), { recursive: true });
  mkdirSync(path.join(tree, 'modules'), { recursive: true });
  copyFileSync(BUSYBOX, path.join(tree, 'bin/busybox'));
  const names = kernel.modules.map((file) => path.basename(file, '.ko'));
  kernel.modules.forEach((file, i) => copyFileSync(file, path.join(tree, 'modules', `${names[i]}.ko`)));
  writeFileSync(path.join(tree, 'modules/order'), `${names.join('\n')}\n`);
  writeFileSync(path.join(tree, 'init'), INITRAMFS_INIT, { mode: 0o755 });
  const list = execFileSync('find', ['.', '-mindepth', '1'], { cwd: tree, encoding: 'utf8' });
  const cpio = spawnSync('sh', ['-c', `cpio -o -H newc --quiet | gzip -9 > '${out}'`], { cwd: tree, input: list });
  if (cpio.status !== 0) throw new Error(`cpio failed: ${cpio.stderr.toString().trim()}`);
}

/** The guest's root tree at `root`: busybox, the VM's init scripts, the kernel and initramfs. */
export function writeVmRootfs(root: string, kernel: VmKernel, work: string): void {
  writeBusyboxRootfs(root, { dhcp: true });
  writeFileSync(path.join(root, 'etc/inittab'), INITTAB);
  writeFileSync(path.join(root, 'etc/init.d/rcS'), RCS, { mode: 0o755 });
  writeFileSync(path.join(root, 'etc/init.d/agent'), AGENT_RUNNER, { mode: 0o755 });
  writeFileSync(path.join(root, 'etc/hostname'), 'busybox-vm\n');
  mkdirSync(path.join(root, 'boot'), { recursive: true });
  copyFileSync(kernel.vmlinux, path.join(root, 'boot/vmlinux'));
  writeInitramfs(kernel, work, path.join(root, 'boot/initrd.img'));
  mkdirSync(path.join(root, 'lib/modules', kernel.release), { recursive: true });
  chmodSync(path.join(root, 'root'), 0o700);
}

/** Disk size: the tree (the uncompressed kernel is most of it) plus room for what tests put in. */
const DISK_MIB = 160;

/** The ext4 disk made from `root` without mounting it (mkfs -d), as qcow2 at `out`. */
export function writeVmDisk(root: string, work: string, out: string): void {
  const raw = path.join(work, 'disk.raw');
  execFileSync('truncate', ['-s', `${DISK_MIB}M`, raw]);
  execFileSync('mkfs.ext4', ['-q', '-F', '-L', 'rootfs', '-d', root, raw], { stdio: ['ignore', 'ignore', 'pipe'] });
  execFileSync('qemu-img', ['convert', '-q', '-c', '-f', 'raw', '-O', 'qcow2', raw, out]);
}

/** metadata.yaml of the VM image. */
export function vmMetadata(kernel: VmKernel, busyboxRelease: string): string {
  return metadataYaml({
    description: `Busybox ${busyboxRelease} VM with Debian's kernel ${kernel.release}`,
    name: 'busybox-vm', os: 'Busybox', release: busyboxRelease, variant: 'vm',
    // Booted with its own kernel, never through firmware: secure boot has nothing to check.
    'requirements.secureboot': 'false',
  }, []);
}
