#!/bin/sh
# Builds the VM guest agent (plugins/instance-qemu/guest/*.c) into dist/plugins/instance-qemu/guest/corral-agent: one
# static binary, so that it runs in any guest whatever its libc (musl-gcc: package musl-tools).
set -eu
cd "$(dirname "$0")/.."
if ! command -v musl-gcc >/dev/null 2>&1; then
  echo "build-agent: musl-gcc not found: install musl-tools (scripts/install.sh does)" >&2
  exit 1
fi
mkdir -p dist/plugins/instance-qemu/guest
musl-gcc -static -Os -Wall -Wextra -Werror -o dist/plugins/instance-qemu/guest/corral-agent.tmp plugins/instance-qemu/guest/*.c
mv dist/plugins/instance-qemu/guest/corral-agent.tmp dist/plugins/instance-qemu/guest/corral-agent
