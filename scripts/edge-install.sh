#!/bin/sh
# Lays out an edge install of corral in <target> from a built tree (npm run build): the bundle of the
# edge set and the few files it loads or runs beside itself (the registry, the host helpers, the proxy
# forwarder), with the package files for `npm ci --omit=dev`. Then, on the device:
#   cd <target> && npm ci --omit=dev && MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072 node --max-semi-space-size=1 --single-threaded --max-old-space-size=1024 --heap-growing-percent=30 dist/bundle/corrald-edge.cjs --dir /var/lib/corral
set -eu
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/edge-install.sh <target directory>}
if [ ! -f dist/bundle/corrald-edge.cjs ]; then
  echo "edge-install: dist/bundle/corrald-edge.cjs is missing: run npm run build first" >&2
  exit 1
fi
mkdir -p "$target"
# Paths as in the tree: the bundle finds its helpers where the compiled tree keeps them.
for f in package.json package-lock.json .npmrc plugin-registry.json \
  dist/bundle/corrald-edge.cjs dist/bundle/corrald-edge.bundle.cjs \
  dist/plugins/instance-lxc/seccomp-proxy/corral-seccomp-proxy dist/plugins/instance-lxc/corral-mknod dist/plugins/instance-lxc/corral-attach-order.so \
  plugins/instance-lxc/mount-injection.py \
  dist/plugins/proxy-devices/forwarder.js dist/plugins/proxy-devices/address.js dist/plugins/proxy-devices/proxy-header.js; do
  mkdir -p "$target/$(dirname "$f")"
  cp -p "$f" "$target/$f"
done
echo "edge-install: laid out in $target; now: cd $target && npm ci --omit=dev"
