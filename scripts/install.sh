#!/usr/bin/env bash
# Installs what corral needs on a Debian 12 machine (run as root), then builds it.
#   ./scripts/install.sh          what the daemon needs to run (and to build its native modules)
#   ./scripts/install.sh --test   that, and what only the test suite uses
# Idempotent: skips apt when every package is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

with_tests=0
case "${1:-}" in
  '') ;;
  --test) with_tests=1 ;;
  -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "install.sh: unknown argument \"$1\" (only --test)" >&2; exit 2 ;;
esac

# Node.js is the one prerequisite this script does not install: Debian 12's own is 18.
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo none)
if [ "$node_major" = none ] || [ "$node_major" -lt 20 ]; then
  cat >&2 <<'MSG'
corral needs Node.js 20 or newer, and this machine has none or an older one (Debian 12 ships 18).
Install Node.js 20 from NodeSource's Debian repository, then run this script again:
    apt-get install -y curl ca-certificates
    curl -fsSL https://deb.nodesource.com/setup_20.x | bash -
    apt-get install -y nodejs
MSG
  exit 1
fi

# What the daemon runs: liblxc and its tools (containers), uidmap (newuidmap, unprivileged containers),
# tar with every compressor, squashfs-tools and attr (images), busybox-static (the first image),
# nftables (NAT, firewalls, proxy DNAT), dnsmasq-base and iproute2 (bridge networks: DHCP/DNS, links,
# tc), btrfs-progs (the btrfs storage driver), python3 (a host tool of the instances), logrotate (the
# log rotation rule scripts/install-service.sh installs), lxd-client (the `lxc` client: how operators
# talk to corral), ca-certificates; make, g++ and python3 build the native modules (sqlite3, node-pty);
# debootstrap (`npm run image:debian` makes its rootfs with it); rsync moves instance files between
# daemons (migration), with socat relaying the sending rsync's remote shell to the daemon.
# Virtual machines: qemu-system-x86 and qemu-utils (QEMU and qemu-img), ovmf (UEFI firmware);
# e2fsprogs (mkfs.ext4 -d makes the test VM image's disk, debugfs reads a kernel off a disk without
# mounting it), cpio (the test VM image's initramfs); its kernel is fetched with apt-get download.
# musl-tools builds the VM guest agent as one static binary (scripts/build-agent.sh) and the guest socket tests' static client.
# The VGA console's SPICE server is a QEMU module that Debian 12 ships in qemu-system-common (pulled
# in by qemu-system-x86; there is no qemu-system-modules-spice package on this release); python3 is
# also the helper that hands a macvtap's device to QEMU (decision 0053).
# swtpm and swtpm-tools emulate a VM's TPM (`tpm` devices): one swtpm per VM, its state in the VM's volume.
# etcd-server is the cluster database: each clustered daemon runs its own etcd member (decision 0055).
# gcc builds the seccomp notify proxy and the device node maker (scripts/build-host-helpers.sh); linux-libc-dev gives it the
# kernel headers, whose syscall tables the daemon also reads to refuse unknown names in security.syscalls.*.
RUNTIME_PACKAGES=(lxc uidmap tar gzip xz-utils bzip2 zstd squashfs-tools attr busybox-static nftables
  dnsmasq-base iproute2 btrfs-progs python3 logrotate lxd-client ca-certificates make g++ debootstrap
  rsync socat qemu-system-x86 qemu-utils ovmf e2fsprogs cpio musl-tools swtpm swtpm-tools etcd-server gcc
  linux-libc-dev)
# What only the tests use: the reference daemon (lxd: the interoperability tests start a private one),
# pylxd (the second real client), prometheus (the metrics tests scrape corral with a private server and
# check the text with promtool), openssl and curl (client certificates, a CA and its CRL, untrusted
# calls), socat (the proxy device bench compares the forwarder with a direct relay), chromium (the web
# page's test drives a headless Chromium through playwright-core), mount (losetup: the unix-block
# device test and bench use a loop device), etcd-client (etcdctl: the failed-join test reads etcd's member list
# as etcd itself reports it).
TEST_PACKAGES=(lxd python3-pylxd python3-websocket prometheus openssl curl socat chromium mount etcd-client)

PACKAGES=("${RUNTIME_PACKAGES[@]}")
if [ "$with_tests" = 1 ]; then PACKAGES+=("${TEST_PACKAGES[@]}"); fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The lxd and lxcfs packages start system daemons on install; nothing here wants them (tests run
  # their own lxd with a private LXD_DIR), so service starts are refused while apt runs.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
  fi
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  # Under systemd the new units are still enabled (socket activation): keep a just-installed system lxd off.
  if [[ " ${missing[*]} " == *" lxd "* ]] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    systemctl disable --now lxd.socket lxd.service lxd-containers.service lxcfs.service >/dev/null 2>&1 || true
  fi
  # Likewise the system Prometheus: the tests run their own on a private port and data directory.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
fi
# Debian's etcd-server ships a system etcd that would start at boot and hold 2379/2380 on localhost:
# corral runs its own member per daemon, so the packaged service stays masked (every run: idempotent).
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null && dpkg-query -W -f='${Status}' etcd-server 2>/dev/null | grep -q 'install ok installed'; then
  systemctl mask --now etcd.service >/dev/null 2>&1 || true
fi

# Unprivileged containers map their ids into root's subordinate range (the reference daemon's default).
for f in /etc/subuid /etc/subgid; do
  grep -q '^root:1000000:' "$f" 2>/dev/null || echo 'root:1000000:1000000000' >> "$f"
done

npm install --no-fund --no-audit --loglevel=error
npm run build --silent
