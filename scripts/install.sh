#!/usr/bin/env bash
# Installs everything corral and its tests need on a Debian 12 machine (run as root), then builds it.
# Idempotent: skips apt when every package is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

# Host packages: liblxc and its tools (containers), uidmap (newuidmap for unprivileged containers),
# tar with every compressor and squashfs-tools (images), busybox-static (the test image),
# nftables (firewall driver detection), the real clients used as acceptance tests
# (lxd-client, python3-pylxd), the reference daemon itself (lxd: the backup interoperability
# tests start a private one), make/g++ for the native modules (sqlite3, node-pty), and prometheus
# (the metrics tests scrape corral with a private Prometheus server and check the text with promtool),
# dnsmasq-base and iproute2 (bridge networks: DHCP/DNS, links; nftables does their NAT and firewall),
# openssl and curl (the TLS tests make client certificates, a CA and its CRL, and call as an untrusted client),
# socat (the proxy device bench compares the forwarder with a direct socat relay),
# btrfs-progs (the btrfs storage driver: mkfs.btrfs, subvolumes, qgroups, send/receive; pools on loop files),
# debootstrap (runtime: `npm run image:debian` makes its rootfs with it; the image tests run it too).
PACKAGES=(lxc uidmap tar gzip xz-utils bzip2 zstd squashfs-tools attr busybox-static nftables
  lxd-client lxd python3-pylxd python3-websocket ca-certificates openssl make g++ python3 prometheus
  dnsmasq-base iproute2 curl socat btrfs-progs debootstrap)
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

# Unprivileged containers map their ids into root's subordinate range (the reference daemon's default).
for f in /etc/subuid /etc/subgid; do
  grep -q '^root:1000000:' "$f" 2>/dev/null || echo 'root:1000000:1000000000' >> "$f"
done

if ! command -v node >/dev/null || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  echo "corral needs Node.js 20 or newer" >&2
  exit 1
fi

npm install --no-fund --no-audit --loglevel=error
npm run build --silent
