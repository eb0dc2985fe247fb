#!/usr/bin/env bash
# Installs everything corral and its tests need on a Debian 12 machine (run as root), then builds it.
# Idempotent: skips apt when every package is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

# Host packages: liblxc and its tools (containers), uidmap (newuidmap for unprivileged containers),
# tar with every compressor and squashfs-tools (images), busybox-static (the test image),
# nftables (firewall driver detection), the real clients used as acceptance tests
# (lxd-client, python3-pylxd), and make/g++ for the native modules (sqlite3, node-pty).
PACKAGES=(lxc uidmap tar gzip xz-utils bzip2 zstd squashfs-tools attr busybox-static nftables
  lxd-client python3-pylxd python3-websocket ca-certificates openssl make g++ python3)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
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
