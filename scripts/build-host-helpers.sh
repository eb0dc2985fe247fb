#!/bin/sh
# Builds the small host helpers with the host's compiler (gcc and the kernel headers: packages gcc
# and linux-libc-dev, which scripts/install.sh installs), into dist/plugins/<plugin>:
#   instance-lxc/corral-seccomp-proxy  the seccomp notify proxy (seccomp-proxy/*.c)
#   instance-lxc/corral-mknod          the device node maker (mknod-helper.c; without it the driver falls back to a shell)
#   instance-lxc/corral-attach-order.so  preloaded into lxc-attach to order liblxc's attach (attach-order.c)
#   unix-devices/corral-uevents        the reader of the kernel's device announcements (uevent-monitor.c)
#   kernel/host-tools/corral-spawner   starts host processes beside the event loop (spawner.c)
#   instance-lxc/corral-livestate     running containers' counters and interfaces (live-state.c)
set -eu
cd "$(dirname "$0")/.."
if ! command -v gcc >/dev/null 2>&1; then
  echo "build-host-helpers: gcc not found: install gcc (scripts/install.sh does)" >&2
  exit 1
fi
# build <output> <sources...>: written under a temporary name first, so a failed build leaves no half binary.
build() {
  out=$1
  shift
  mkdir -p "$(dirname "$out")"
  gcc -O2 -Wall -Wextra -Werror -o "$out.tmp" "$@"
  mv "$out.tmp" "$out"
}
build dist/plugins/instance-lxc/seccomp-proxy/corral-seccomp-proxy plugins/instance-lxc/seccomp-proxy/*.c
build dist/plugins/instance-lxc/corral-mknod plugins/instance-lxc/mknod-helper.c
build dist/plugins/instance-lxc/corral-attach-order.so -shared -fPIC plugins/instance-lxc/attach-order.c
build dist/plugins/unix-devices/corral-uevents plugins/unix-devices/uevent-monitor.c
build dist/plugins/instance-lxc/corral-livestate plugins/instance-lxc/live-state.c
build dist/kernel/host-tools/corral-spawner kernel/host-tools/spawner.c
