#!/usr/bin/env bash
# Installs everything corral and its tests need on a Debian 12 machine (run as root), then builds it.
# Idempotent: skips apt when every package is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

# Host packages: openssl (server certificate), the real clients used as acceptance tests
# (lxd-client, python3-pylxd), nftables (firewall driver detection).
PACKAGES=(openssl nftables lxd-client python3-pylxd python3-websocket ca-certificates)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v node >/dev/null || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  echo "corral needs Node.js 20 or newer" >&2
  exit 1
fi

npm install --no-fund --no-audit --loglevel=error
npm run build --silent
