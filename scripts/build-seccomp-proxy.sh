#!/bin/sh
# Builds the seccomp notify proxy of the liblxc driver (plugins/instance-lxc/seccomp-proxy/*.c) into
# dist/plugins/instance-lxc/seccomp-proxy/corral-seccomp-proxy (gcc and the kernel headers: packages
# gcc and linux-libc-dev, which scripts/install.sh installs).
set -eu
cd "$(dirname "$0")/.."
if ! command -v gcc >/dev/null 2>&1; then
  echo "build-seccomp-proxy: gcc not found: install gcc (scripts/install.sh does)" >&2
  exit 1
fi
out=dist/plugins/instance-lxc/seccomp-proxy
mkdir -p "$out"
gcc -O2 -Wall -Wextra -Werror -o "$out/corral-seccomp-proxy.tmp" plugins/instance-lxc/seccomp-proxy/*.c
mv "$out/corral-seccomp-proxy.tmp" "$out/corral-seccomp-proxy"
