#!/bin/sh
# Builds the lxc driver's device node helper (plugins/instance-lxc/mknod-helper.c) into
# dist/plugins/instance-lxc/corral-mknod. Without it the driver falls back to a shell running mknod.
set -eu
cd "$(dirname "$0")/.."
mkdir -p dist/plugins/instance-lxc
cc -O2 -Wall -Wextra -Werror -o dist/plugins/instance-lxc/corral-mknod.tmp plugins/instance-lxc/mknod-helper.c
mv dist/plugins/instance-lxc/corral-mknod.tmp dist/plugins/instance-lxc/corral-mknod
